// softmax over the last dim on CUDA: one block per row, max-subtracted.
#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda {
namespace {

template <class T> __global__ void softmax_fwd_kernel(const T* x, T* y, int64_t c) {
  __shared__ float scratch[32];
  const T* xr = x + blockIdx.x * c;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) m = fmaxf(m, ld(xr[j]));
  m = block_max(m, scratch);
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) s += expf(ld(xr[j]) - m);
  float inv = 1.0f / block_sum(s, scratch);
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) y[blockIdx.x * c + j] = st<T>(expf(ld(xr[j]) - m) * inv);
}

// dx = y * (dy - sum(dy * y))
template <class T> __global__ void softmax_bwd_kernel(const T* y, const T* dy, T* dx, int64_t c) {
  __shared__ float scratch[32];
  int64_t off = blockIdx.x * c;
  float dot = 0.0f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) dot += ld(y[off + j]) * ld(dy[off + j]);
  dot = block_sum(dot, scratch);
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) dx[off + j] = st<T>(ld(y[off + j]) * (ld(dy[off + j]) - dot));
}

}  // namespace

void softmax_forward(const Tensor& x, Tensor& y) {
  with_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmax_fwd_kernel<T><<<static_cast<unsigned>(x.rows()), row_threads(x.cols()), 0, stream_of(x)>>>(
        ptr<T>(x), ptr<T>(y), x.cols());
  });
  check_launch("softmax_forward");
}

void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  with_float(y.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmax_bwd_kernel<T><<<static_cast<unsigned>(y.rows()), row_threads(y.cols()), 0, stream_of(y)>>>(
        ptr<T>(y), ptr<T>(dy), ptr<T>(dx), y.cols());
  });
  check_launch("softmax_backward");
}

}  // namespace dt::kernels::cuda
