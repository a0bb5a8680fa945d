// rmsnorm on CUDA: one block per row for y and dx; dweight by deterministic column sums.
#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda {
namespace {

template <class T> __global__ void rmsnorm_fwd_kernel(const T* x, const T* w, float eps, T* y, float* rstd, int64_t c) {
  __shared__ float scratch[32];
  const T* xr = x + blockIdx.x * c;
  float ss = 0.0f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) ss += ld(xr[j]) * ld(xr[j]);
  float rs = rsqrtf(block_sum(ss, scratch) / static_cast<float>(c) + eps);
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) y[blockIdx.x * c + j] = st<T>(ld(xr[j]) * rs * ld(w[j]));
  if (threadIdx.x == 0) rstd[blockIdx.x] = rs;
}

// dx = rstd * (g - xhat * mean(g * xhat)), g = dy * w, xhat = x * rstd.
template <class T>
__global__ void rmsnorm_dx_kernel(const T* dy, const T* x, const T* w, const float* rstd, T* dx, int64_t c) {
  __shared__ float scratch[32];
  int64_t off = blockIdx.x * c;
  float rs = rstd[blockIdx.x], sgx = 0.0f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) sgx += ld(dy[off + j]) * ld(w[j]) * (ld(x[off + j]) * rs);
  sgx = block_sum(sgx, scratch) / static_cast<float>(c);
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
    dx[off + j] = st<T>(rs * (ld(dy[off + j]) * ld(w[j]) - (ld(x[off + j]) * rs) * sgx));
}

template <class T> struct DyXhat {
  const T *dy, *x;
  const float* rstd;
  int64_t c;
  __device__ float operator()(int64_t r, int64_t j) const { return ld(dy[r * c + j]) * (ld(x[r * c + j]) * rstd[r]); }
};

}  // namespace

void rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor& rstd) {
  int64_t rows = x.rows(), c = x.cols();
  with_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    rmsnorm_fwd_kernel<T><<<static_cast<unsigned>(rows), row_threads(c), 0, stream_of(x)>>>(
        ptr<T>(x), ptr<T>(weight), eps, ptr<T>(y), ptr<float>(rstd), c);
  });
  check_launch("rmsnorm_forward");
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                      Tensor& dweight) {
  int64_t rows = x.rows(), c = x.cols();
  with_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    // dweight first: dx may overwrite dy in place (as on the CPU).
    colsum_accumulate(x.device(), rows, c, DyXhat<T>{ptr<T>(dy), ptr<T>(x), ptr<float>(rstd), c}, ptr<T>(dweight),
                      "rmsnorm_backward");
    rmsnorm_dx_kernel<T><<<static_cast<unsigned>(rows), row_threads(c), 0, stream_of(x)>>>(
        ptr<T>(dy), ptr<T>(x), ptr<T>(weight), ptr<float>(rstd), ptr<T>(dx), c);
    check_launch("rmsnorm_backward");
  });
}

}  // namespace dt::kernels::cuda
