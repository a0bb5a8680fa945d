// Vocab-parallel cross-entropy on CUDA: one block per row of this rank's columns, as
// cross_entropy.cu, reading only the first `valid` columns (padding is never read).
// Targets are checked on the device first (one sync), so a bad batch is rejected before
// any output is written, as on the CPU.
#include <limits>

#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda {
namespace {

// Targets are global ids: a shard can check only that each is >= 0 or ignore_index.
void check_shard_target_ids(const char* op, const Tensor& targets, int32_t ignore_index) {
  BadIndex bad = find_bad_index(targets.device(), ptr<int32_t>(targets), targets.numel(), 0,
                                std::numeric_limits<int32_t>::max(), ignore_index);
  if (bad.pos < 0) return;
  invalid(std::string(op) + ": targets[" + std::to_string(bad.pos) + "] is " + std::to_string(bad.value) +
          "; accepted: a vocabulary id >= 0 or ignore_index " + std::to_string(ignore_index));
}

// The column of this shard that holds target t, or -1 when another shard holds it.
__device__ __forceinline__ int64_t shard_column(int32_t t, int64_t vocab_begin, int64_t valid) {
  int64_t c = static_cast<int64_t>(t) - vocab_begin;
  return c >= 0 && c < valid ? c : -1;
}

template <class T> __global__ void ce_shard_max_kernel(const T* logits, int64_t vs, int64_t valid, float* row_max) {
  __shared__ float scratch[32];
  int64_t r = blockIdx.x;
  const T* xr = logits + r * vs;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) m = fmaxf(m, ld(xr[j]));
  m = block_max(m, scratch);
  if (threadIdx.x == 0) row_max[r] = m;
}

// partial[r] = {sum_j<valid exp(z_j - row_max[r]), z[target column] or 0}; {0, 0} if ignored.
template <class T>
__global__ void ce_shard_fwd_kernel(const T* logits, const int32_t* targets, int64_t vs, int64_t vocab_begin,
                                    int64_t valid, int32_t ignore_index, const float* row_max, float* partial) {
  __shared__ float scratch[32];
  int64_t r = blockIdx.x;
  int32_t t = targets[r];
  if (t == ignore_index) {  // the whole block leaves: no thread reaches the reduction
    if (threadIdx.x == 0) partial[2 * r] = partial[2 * r + 1] = 0.0f;
    return;
  }
  const T* xr = logits + r * vs;
  float m = row_max[r], s = 0.0f;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) s += expf(ld(xr[j]) - m);
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) {
    int64_t c = shard_column(t, vocab_begin, valid);
    partial[2 * r] = s;
    partial[2 * r + 1] = c >= 0 ? ld(xr[c]) : 0.0f;
  }
}

// dlogits = (exp(z - lse) - onehot) * dlosses[r] on valid columns; 0 on padding and ignored rows.
template <class T>
__global__ void ce_shard_bwd_kernel(const T* logits, const int32_t* targets, int64_t vs, int64_t vocab_begin,
                                    int64_t valid, int32_t ignore_index, const float* lse, const float* dlosses,
                                    T* dlogits) {
  int64_t r = blockIdx.x;
  int32_t t = targets[r];
  const T* xr = logits + r * vs;
  T* dr = dlogits + r * vs;
  if (t == ignore_index) {
    for (int64_t j = threadIdx.x; j < vs; j += blockDim.x) dr[j] = st<T>(0.0f);
    return;
  }
  int64_t c = shard_column(t, vocab_begin, valid);
  float g = dlosses[r], shift = lse[r];
  for (int64_t j = threadIdx.x; j < vs; j += blockDim.x)
    dr[j] = j < valid ? st<T>((expf(ld(xr[j]) - shift) - (j == c ? 1.0f : 0.0f)) * g) : st<T>(0.0f);
}

}  // namespace

void cross_entropy_shard_max(const Tensor& logits, int64_t valid, Tensor& row_max) {
  int64_t rows = logits.dim(0), vs = logits.dim(1);
  if (rows == 0) return;  // a grid of no blocks is a launch error
  with_float(logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    ce_shard_max_kernel<T><<<static_cast<unsigned>(rows), row_threads(valid), 0, stream_of(logits)>>>(
        ptr<T>(logits), vs, valid, ptr<float>(row_max));
  });
  check_launch("cross_entropy_shard_max");
}

void cross_entropy_shard_forward(const Tensor& logits, const Tensor& targets, int64_t vocab_begin, int64_t valid,
                                 int32_t ignore_index, const Tensor& row_max, Tensor& partial) {
  int64_t rows = logits.dim(0), vs = logits.dim(1);
  if (rows == 0) return;
  check_shard_target_ids("cross_entropy_shard_forward", targets, ignore_index);
  with_float(logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    ce_shard_fwd_kernel<T><<<static_cast<unsigned>(rows), row_threads(valid), 0, stream_of(logits)>>>(
        ptr<T>(logits), ptr<int32_t>(targets), vs, vocab_begin, valid, ignore_index, ptr<float>(row_max),
        ptr<float>(partial));
  });
  check_launch("cross_entropy_shard_forward");
}

void cross_entropy_shard_backward(const Tensor& logits, const Tensor& targets, int64_t vocab_begin, int64_t valid,
                                  int32_t ignore_index, const Tensor& lse, const Tensor& dlosses, Tensor& dlogits) {
  int64_t rows = logits.dim(0), vs = logits.dim(1);
  if (rows == 0) return;
  check_shard_target_ids("cross_entropy_shard_backward", targets, ignore_index);
  with_float(logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    ce_shard_bwd_kernel<T><<<static_cast<unsigned>(rows), row_threads(vs), 0, stream_of(logits)>>>(
        ptr<T>(logits), ptr<int32_t>(targets), vs, vocab_begin, valid, ignore_index, ptr<float>(lse),
        ptr<float>(dlosses), ptr<T>(dlogits));
  });
  check_launch("cross_entropy_shard_backward");
}

}  // namespace dt::kernels::cuda
