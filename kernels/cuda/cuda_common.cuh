// What every CUDA kernel file shares: element loads and stores (math in f32 whatever the
// storage type, rounded once on store, to nearest even as on the CPU), dtype dispatch,
// the compute stream, launch checks, warp and block reductions, and the column-sum pair
// that parameter gradients (dweight, dbias) use so that they are deterministic: rows are
// summed in fixed chunks and the chunks in order, never with atomics.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/gpu_runtime.h"
#include "core/tensor.h"
#include "kernels/cuda/cuda_ops.h"

namespace dt::kernels::cuda {

using bf16_t = __nv_bfloat16;
using f16_t = __half;

__device__ __forceinline__ float ld(float x) { return x; }
__device__ __forceinline__ float ld(bf16_t x) { return __bfloat162float(x); }
__device__ __forceinline__ float ld(f16_t x) { return __half2float(x); }
template <class T> __device__ __forceinline__ T st(float v);
template <> __device__ __forceinline__ float st<float>(float v) { return v; }
template <> __device__ __forceinline__ bf16_t st<bf16_t>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ f16_t st<f16_t>(float v) { return __float2half_rn(v); }

template <class T> struct Tag { using type = T; };

// fn(Tag<T>{}) with the device storage type of a floating dtype (validated by the caller).
template <class Fn> void with_float(DType t, Fn&& fn) {
  switch (t) {
    case DType::F32: fn(Tag<float>{}); return;
    case DType::BF16: fn(Tag<bf16_t>{}); return;
    case DType::F16: fn(Tag<f16_t>{}); return;
    default: invalid(std::string("dtype ") + dtype_name(t) + " is not a floating type; accepted: f32, bf16, f16");
  }
}
// The same over every dtype (i32 and i64 too).
template <class Fn> void with_any(DType t, Fn&& fn) {
  if (t == DType::I32) fn(Tag<int32_t>{});
  else if (t == DType::I64) fn(Tag<int64_t>{});
  else with_float(t, fn);
}

template <class T> T* ptr(const Tensor& t) { return static_cast<T*>(t.raw()); }
inline cudaStream_t stream_of(Device d) { return static_cast<cudaStream_t>(gpu::compute_stream(d.index)); }
inline cudaStream_t stream_of(const Tensor& t) { return stream_of(t.device()); }

// Throws INTERNAL naming `op` when the last launch failed (bad configuration, no kernel
// image for this GPU's architecture, ...).
inline void check_launch(const char* op) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) fail(DT_ERR_INTERNAL, std::string(op) + ": CUDA kernel launch failed: " + cudaGetErrorString(e));
}

constexpr int kThreads = 256;
// Blocks for a grid-stride loop over n elements: enough to fill any current GPU.
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 8192 ? 8192 : b));
}
#define DT_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

// Elementwise ops: f(i) for every i in [0, n), a grid-stride loop on the compute stream.
template <class F> __global__ void map_kernel(int64_t n, F f) {
  DT_GRID_STRIDE(i, n) f(i);
}
template <class F> void launch_map(Device device, int64_t n, F f, const char* op) {
  if (n > 0) map_kernel<<<grid_for(n), kThreads, 0, stream_of(device)>>>(n, f);
  check_launch(op);
}

__device__ __forceinline__ float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Sum (or max) over the block, returned to every thread. blockDim.x is a multiple of 32,
// at most 1024; `scratch` holds 32 floats of shared memory. Same order on every call.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nwarps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nwarps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

// Threads per block for a kernel with one block per row of `cols` elements.
inline int row_threads(int64_t cols) { return cols >= 1024 ? 512 : (cols >= 256 ? 256 : (cols >= 64 ? 64 : 32)); }

// ---- deterministic column sums: out[c] += sum_r f(r, c) -----------------------------------
// Pass 1: rows in chunks of `per` (grid.y = chunk), one thread per column, partials in f32
// scratch [chunks, C]. Pass 2: one thread per column adds the chunks in order into out.
template <class F> __global__ void colsum_partial_kernel(int64_t rows, int64_t cols, int64_t per, F f, float* part) {
  int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  int64_t r0 = blockIdx.y * per, r1 = r0 + per < rows ? r0 + per : rows;
  float s = 0.0f;
  for (int64_t r = r0; r < r1; ++r) s += f(r, c);
  part[blockIdx.y * cols + c] = s;
}
template <class T> __global__ void colsum_finish_kernel(const float* part, int64_t chunks, int64_t cols, T* out) {
  int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (int64_t k = 0; k < chunks; ++k) s += part[k * cols + c];
  out[c] = st<T>(ld(out[c]) + s);
}

struct ColsumPlan {
  int64_t per, chunks;
  Tensor scratch;
};
inline ColsumPlan colsum_plan(Device device, int64_t rows, int64_t cols) {
  int64_t per = 64;
  while ((rows + per - 1) / per > 65535) per *= 2;
  int64_t chunks = (rows + per - 1) / per;
  return {per, chunks, Tensor::uninit({chunks * cols}, DType::F32, device)};
}
// out (on `device`, T) += column sums of f over [rows, cols].
template <class T, class F> void colsum_accumulate(Device device, int64_t rows, int64_t cols, F f, T* out, const char* op) {
  ColsumPlan p = colsum_plan(device, rows, cols);
  cudaStream_t s = stream_of(device);
  dim3 grid(static_cast<unsigned>((cols + 127) / 128), static_cast<unsigned>(p.chunks));
  colsum_partial_kernel<<<grid, 128, 0, s>>>(rows, cols, p.per, f, ptr<float>(p.scratch));
  colsum_finish_kernel<T><<<static_cast<unsigned>((cols + 127) / 128), 128, 0, s>>>(ptr<float>(p.scratch), p.chunks,
                                                                                  cols, out);
  check_launch(op);
}

// Index checks for ops whose CPU twin rejects a bad index before writing anything: the
// first bad position (or -1) and its value, found on the device and read back (one sync).
struct BadIndex {
  int64_t pos = -1;
  int32_t value = 0;
};
BadIndex find_bad_index(Device device, const int32_t* ids, int64_t n, int32_t lo, int32_t hi, int32_t allowed);

}  // namespace dt::kernels::cuda
