// Shared by attention.cu (forward, prefill and decode) and attention_backward.cu: the
// layout of q, k, v, out and lse (kernels/ops.h), and the warp-level building blocks.
//
// The kernels are flash-style: a warp owns one row (a query, or in the backward a key),
// walks the keys (queries) 32 at a time with one lane per key for the dot products, and
// keeps a running max and sum (online softmax), so no Tq x Tk score matrix ever exists.
// Each lane owns the output dims lane, lane + 32, ... (kPerLane of them: D <= 256).
// They run on CUDA cores in f32, not on tensor cores: correct and memory-friendly for
// decode, several times short of a tensor-core kernel for long prefill.
#pragma once
#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda::attn {

constexpr int kMaxD = 256;
constexpr int kPerLane = kMaxD / 32;
constexpr int kWarps = 4;  // rows per block

struct Dims {
  int64_t b, tq, tk, hq, hkv;
  int d;
  float scale;
  __host__ __device__ int64_t qrow(int64_t bi, int64_t i, int64_t h) const { return ((bi * tq + i) * hq + h) * d; }
  __host__ __device__ int64_t krow(int64_t bi, int64_t j, int64_t g) const { return ((bi * tk + j) * hkv + g) * d; }
  __host__ __device__ int64_t kstride() const { return hkv * d; }  // between consecutive keys
  __host__ __device__ int64_t stat(int64_t bi, int64_t h, int64_t i) const { return (bi * hq + h) * tq + i; }
  __host__ __device__ int64_t key_end(int64_t i) const { return tk - tq + i + 1; }  // causal: keys [0, key_end)
  __host__ __device__ int64_t group() const { return hq / hkv; }
};

Dims dims_of(const Tensor& q, const Tensor& k, float scale);

// Copies a row of d elements into f32 shared memory owned by this warp.
template <class T> __device__ __forceinline__ void load_row(const T* src, int d, float* dst) {
  for (int e = threadIdx.x & 31; e < d; e += 32) dst[e] = ld(src[e]);
  __syncwarp();
}

// Dot product of an f32 shared row with a global row, by one lane.
template <class T> __device__ __forceinline__ float dot_row(const float* a, const T* b, int d) {
  float s = 0.0f;
  for (int e = 0; e < d; ++e) s += a[e] * ld(b[e]);
  return s;
}

// acc[t] (dims lane + 32 t) += sum over the tile's n rows of w_r * rows[r][dim], with w_r
// held by lane r; rows are `stride` apart starting at `base`.
template <class T>
__device__ __forceinline__ void add_weighted_rows(float (&acc)[kPerLane], float w, const T* base, int64_t stride,
                                                  int n, int d) {
  int lane = threadIdx.x & 31;
  for (int r = 0; r < n; ++r) {
    float wr = __shfl_sync(0xffffffffu, w, r);
    const T* row = base + r * stride;
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      int e = lane + 32 * t;
      if (e < d) acc[t] += wr * ld(row[e]);
    }
  }
}

// Stores this lane's dims of a row: dst[lane + 32 t] = acc[t] * mul, rounded into T.
template <class T> __device__ __forceinline__ void store_dims(const float (&acc)[kPerLane], float mul, T* dst, int d) {
  int lane = threadIdx.x & 31;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t)
    if (lane + 32 * t < d) dst[lane + 32 * t] = st<T>(acc[t] * mul);
}

}  // namespace dt::kernels::cuda::attn
