// gpu_runtime.h over the CUDA runtime API (cudart only; never the driver library). Any
// error from cudaGetDeviceCount means "no GPU": on a machine without a driver it returns
// error 35 (insufficient driver), not 100 (no device).
#include <cuda_runtime_api.h>

#include <cstring>
#include <mutex>

#include "core/error.h"
#include "core/gpu_runtime.h"

namespace dt::gpu {
namespace {

constexpr int kMaxDevices = 64;
constexpr size_t kStagingChunk = size_t(4) << 20;  // bytes per pinned staging buffer
constexpr size_t kStagedFrom = size_t(1) << 20;    // copies this large go through staging

struct Probe {
  int count = 0;
  std::string note;
};

const Probe& probe() {
  static Probe p = [] {
    Probe r;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      r.note = std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorName(e) + ")";
      (void)cudaGetLastError();
    } else {
      r.count = n < kMaxDevices ? n : kMaxDevices;
      r.note = n ? "ok" : "no CUDA device present";
    }
    return r;
  }();
  return p;
}

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  fail(DT_ERR_INTERNAL, std::string(what) + ": " + cudaGetErrorString(e));
}

// Per device: the compute stream, and two pinned staging buffers with the events that say
// when the DMA using each has finished. Made on first use; kept for the process's life.
struct DeviceState {
  std::once_flag stream_once;
  cudaStream_t stream = nullptr;
  std::mutex staging_mu;  // one staged copy at a time per device
  void* staging[2] = {nullptr, nullptr};
  cudaEvent_t done[2] = {nullptr, nullptr};
};
DeviceState g_devices[kMaxDevices];

DeviceState& state(int device) {
  if (device < 0 || device >= probe().count)
    fail(DT_ERR_UNSUPPORTED, "cuda:" + std::to_string(device) + " is not available: " + probe().note +
                                 " (CUDA devices found: " + std::to_string(probe().count) + ")");
  return g_devices[device];
}

cudaStream_t stream_of(int device) {
  DeviceState& s = state(device);
  check(cudaSetDevice(device), "cudaSetDevice");
  std::call_once(s.stream_once, [&] { check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate"); });
  return s.stream;
}

// A small copy straight from or to pageable memory, waited for.
void direct_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t st) {
  check(cudaMemcpyAsync(dst, src, bytes, kind, st), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(st), "cudaStreamSynchronize");
}

void ensure_staging(DeviceState& s) {
  if (s.staging[0]) return;
  for (int i = 0; i < 2; ++i) {
    check(cudaHostAlloc(&s.staging[i], kStagingChunk, cudaHostAllocDefault), "cudaHostAlloc (staging)");
    check(cudaEventCreateWithFlags(&s.done[i], cudaEventDisableTiming), "cudaEventCreate");
  }
}

}  // namespace

int device_count() { return probe().count; }
std::string availability_note() { return probe().note; }

void* device_alloc(int device, size_t bytes) {
  check(cudaSetDevice(device), "cudaSetDevice");
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return nullptr;
  }
  check(e, "cudaMalloc");
  return p;
}

void device_free(int device, void* ptr) {
  if (!ptr) return;
  cudaSetDevice(device);
  cudaFree(ptr);  // synchronizes the device: no kernel still uses the block afterwards
}

void* compute_stream(int device) { return stream_of(device); }

void synchronize(int device) {
  check(cudaStreamSynchronize(stream_of(device)), "cudaStreamSynchronize (an earlier kernel on this device failed)");
}

void copy_to_device(int device, void* dst, const void* src, size_t bytes) {
  cudaStream_t st = stream_of(device);
  if (bytes < kStagedFrom) return direct_copy(dst, src, bytes, cudaMemcpyHostToDevice, st);
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> g(s.staging_mu);
  ensure_staging(s);
  for (size_t off = 0, i = 0; off < bytes; off += kStagingChunk, ++i) {
    size_t n = bytes - off < kStagingChunk ? bytes - off : kStagingChunk;
    int b = static_cast<int>(i % 2);
    check(cudaEventSynchronize(s.done[b]), "cudaEventSynchronize");  // its last DMA is done
    std::memcpy(s.staging[b], static_cast<const char*>(src) + off, n);
    check(cudaMemcpyAsync(static_cast<char*>(dst) + off, s.staging[b], n, cudaMemcpyHostToDevice, st),
          "cudaMemcpyAsync host->device");
    check(cudaEventRecord(s.done[b], st), "cudaEventRecord");
  }
  check(cudaStreamSynchronize(st), "cudaStreamSynchronize");
}

void copy_to_host(int device, void* dst, const void* src, size_t bytes) {
  cudaStream_t st = stream_of(device);
  if (bytes < kStagedFrom) return direct_copy(dst, src, bytes, cudaMemcpyDeviceToHost, st);
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> g(s.staging_mu);
  ensure_staging(s);
  // Chunk i lands in buffer i % 2; while it is in flight, chunk i - 1 is copied out.
  size_t chunks = (bytes + kStagingChunk - 1) / kStagingChunk;
  auto chunk_len = [&](size_t i) { return i + 1 < chunks ? kStagingChunk : bytes - i * kStagingChunk; };
  for (size_t i = 0; i <= chunks; ++i) {
    if (i < chunks) {
      int b = static_cast<int>(i % 2);
      check(cudaMemcpyAsync(s.staging[b], static_cast<const char*>(src) + i * kStagingChunk, chunk_len(i),
                            cudaMemcpyDeviceToHost, st),
            "cudaMemcpyAsync device->host");
      check(cudaEventRecord(s.done[b], st), "cudaEventRecord");
    }
    if (i > 0) {
      int b = static_cast<int>((i - 1) % 2);
      check(cudaEventSynchronize(s.done[b]), "cudaEventSynchronize");
      std::memcpy(static_cast<char*>(dst) + (i - 1) * kStagingChunk, s.staging[b], chunk_len(i - 1));
    }
  }
}

void copy_device(int device, void* dst, const void* src, size_t bytes) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_of(device)), "cudaMemcpyAsync device->device");
}

void memset_zero(int device, void* dst, size_t bytes) {
  check(cudaMemsetAsync(dst, 0, bytes, stream_of(device)), "cudaMemsetAsync");
}

}  // namespace dt::gpu
