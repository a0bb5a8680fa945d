// Cross-entropy over rows of logits on CUDA: one block per row, log-sum-exp taken
// max-subtracted. Targets are checked on the device first (one sync), so a bad batch is
// rejected before any output is written, as on the CPU.
#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda {
namespace {

void check_targets(const char* op, const Tensor& targets, int64_t v, int32_t ignore_index) {
  BadIndex bad = find_bad_index(targets.device(), ptr<int32_t>(targets), targets.numel(), 0,
                                static_cast<int32_t>(v), ignore_index);
  if (bad.pos < 0) return;
  invalid(std::string(op) + ": targets[" + std::to_string(bad.pos) + "] is " + std::to_string(bad.value) +
          "; accepted: [0, " + std::to_string(v) + ") or ignore_index " + std::to_string(ignore_index));
}

// Row maximum and log(sum(exp(x - max))), to every thread of the block.
template <class T> __device__ void row_stats(const T* x, int64_t v, float* scratch, float& mx, float& log_sum) {
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) m = fmaxf(m, ld(x[j]));
  m = block_max(m, scratch);
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) s += expf(ld(x[j]) - m);
  mx = m;
  log_sum = logf(block_sum(s, scratch));
}

template <class T>
__global__ void ce_fwd_kernel(const T* logits, const int32_t* targets, int32_t ignore_index, int64_t v, float* losses) {
  __shared__ float scratch[32];
  int64_t r = blockIdx.x;
  int32_t t = targets[r];
  if (t == ignore_index) {
    if (threadIdx.x == 0) losses[r] = 0.0f;
    return;
  }
  float m, ls;
  row_stats(logits + r * v, v, scratch, m, ls);
  if (threadIdx.x == 0) losses[r] = ls - (ld(logits[r * v + t]) - m);
}

// dlogits = (softmax - onehot(target)) * dlosses[row]; zero rows where ignored.
template <class T>
__global__ void ce_bwd_kernel(const T* logits, const int32_t* targets, const float* dlosses, int32_t ignore_index,
                              int64_t v, T* dlogits) {
  __shared__ float scratch[32];
  int64_t r = blockIdx.x;
  int32_t t = targets[r];
  T* dr = dlogits + r * v;
  if (t == ignore_index) {
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x) dr[j] = st<T>(0.0f);
    return;
  }
  const T* xr = logits + r * v;
  float m, ls;
  row_stats(xr, v, scratch, m, ls);
  float g = dlosses[r], shift = m + ls;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x)
    dr[j] = st<T>((expf(ld(xr[j]) - shift) - (j == t ? 1.0f : 0.0f)) * g);
}

}  // namespace

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int32_t ignore_index, Tensor& losses) {
  int64_t rows = logits.dim(0), v = logits.dim(1);
  check_targets("cross_entropy_forward", targets, v, ignore_index);
  with_float(logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    ce_fwd_kernel<T><<<static_cast<unsigned>(rows), row_threads(v), 0, stream_of(logits)>>>(
        ptr<T>(logits), ptr<int32_t>(targets), ignore_index, v, ptr<float>(losses));
  });
  check_launch("cross_entropy_forward");
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& dlosses, int32_t ignore_index,
                            Tensor& dlogits) {
  int64_t rows = logits.dim(0), v = logits.dim(1);
  check_targets("cross_entropy_backward", targets, v, ignore_index);
  with_float(logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    ce_bwd_kernel<T><<<static_cast<unsigned>(rows), row_threads(v), 0, stream_of(logits)>>>(
        ptr<T>(logits), ptr<int32_t>(targets), ptr<float>(dlosses), ignore_index, v, ptr<T>(dlogits));
  });
  check_launch("cross_entropy_backward");
}

}  // namespace dt::kernels::cuda
