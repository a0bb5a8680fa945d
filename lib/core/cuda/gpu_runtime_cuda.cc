// gpu_runtime.h over the CUDA runtime API (cudart only; never the driver library). Any
// error from cudaGetDeviceCount means "no GPU": on a machine without a driver it returns
// error 35 (insufficient driver), not 100 (no device).
#include <cuda_runtime_api.h>

#include <mutex>

#include "core/error.h"
#include "core/gpu_runtime.h"

namespace dt::gpu {
namespace {

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
      r.count = n;
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
  cudaFree(ptr);
}

void copy_to_device(int device, void* dst, const void* src, size_t bytes) {
  check(cudaSetDevice(device), "cudaSetDevice");
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy host->device");
}

void copy_to_host(int device, void* dst, const void* src, size_t bytes) {
  check(cudaSetDevice(device), "cudaSetDevice");
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy device->host");
}

void memset_zero(int device, void* dst, size_t bytes) {
  check(cudaSetDevice(device), "cudaSetDevice");
  check(cudaMemset(dst, 0, bytes), "cudaMemset");
}

}  // namespace dt::gpu
