// layernorm on CUDA: one block per row for y and dx (two-pass mean and variance, as the
// CPU); dweight and dbias by deterministic column sums (cuda_common.cuh).
#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda {
namespace {

template <class T>
__global__ void layernorm_fwd_kernel(const T* x, const T* w, const T* b, float eps, T* y, float* mean, float* rstd,
                                     int64_t c) {
  __shared__ float scratch[32];
  const T* xr = x + blockIdx.x * c;
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) s += ld(xr[j]);
  float m = block_sum(s, scratch) / static_cast<float>(c);
  float v = 0.0f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    float d = ld(xr[j]) - m;
    v += d * d;
  }
  float rs = rsqrtf(block_sum(v, scratch) / static_cast<float>(c) + eps);
  T* yr = y + blockIdx.x * c;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
    yr[j] = st<T>((ld(xr[j]) - m) * rs * ld(w[j]) + (b ? ld(b[j]) : 0.0f));
  if (threadIdx.x == 0) {
    mean[blockIdx.x] = m;
    rstd[blockIdx.x] = rs;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w.
template <class T>
__global__ void layernorm_dx_kernel(const T* dy, const T* x, const T* w, const float* mean, const float* rstd, T* dx,
                                    int64_t c) {
  __shared__ float scratch[32];
  int64_t off = blockIdx.x * c;
  float m = mean[blockIdx.x], rs = rstd[blockIdx.x], sg = 0.0f, sgx = 0.0f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    float g = ld(dy[off + j]) * ld(w[j]);
    sg += g;
    sgx += g * (ld(x[off + j]) - m) * rs;
  }
  sg = block_sum(sg, scratch) / static_cast<float>(c);
  sgx = block_sum(sgx, scratch) / static_cast<float>(c);
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    float xh = (ld(x[off + j]) - m) * rs;
    dx[off + j] = st<T>(rs * (ld(dy[off + j]) * ld(w[j]) - sg - xh * sgx));
  }
}

template <class T> struct DyXhat {  // dy * xhat, for dweight
  const T *dy, *x;
  const float *mean, *rstd;
  int64_t c;
  __device__ float operator()(int64_t r, int64_t j) const {
    return ld(dy[r * c + j]) * ((ld(x[r * c + j]) - mean[r]) * rstd[r]);
  }
};
template <class T> struct Dy {  // dy, for dbias
  const T* dy;
  int64_t c;
  __device__ float operator()(int64_t r, int64_t j) const { return ld(dy[r * c + j]); }
};

}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y, Tensor& mean,
                       Tensor& rstd) {
  int64_t rows = x.rows(), c = x.cols();
  with_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    layernorm_fwd_kernel<T><<<static_cast<unsigned>(rows), row_threads(c), 0, stream_of(x)>>>(
        ptr<T>(x), ptr<T>(weight), bias.defined() ? ptr<T>(bias) : nullptr, eps, ptr<T>(y), ptr<float>(mean),
        ptr<float>(rstd), c);
  });
  check_launch("layernorm_forward");
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor& dx, Tensor& dweight, Tensor& dbias) {
  int64_t rows = x.rows(), c = x.cols();
  with_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    // dweight and dbias first: dx may overwrite dy in place (as on the CPU).
    if (dweight.defined())
      colsum_accumulate(x.device(), rows, c, DyXhat<T>{ptr<T>(dy), ptr<T>(x), ptr<float>(mean), ptr<float>(rstd), c},
                        ptr<T>(dweight), "layernorm_backward");
    if (dbias.defined()) colsum_accumulate(x.device(), rows, c, Dy<T>{ptr<T>(dy), c}, ptr<T>(dbias), "layernorm_backward");
    if (dx.defined())
      layernorm_dx_kernel<T><<<static_cast<unsigned>(rows), row_threads(c), 0, stream_of(x)>>>(
          ptr<T>(dy), ptr<T>(x), ptr<T>(weight), ptr<float>(mean), ptr<float>(rstd), ptr<T>(dx), c);
    check_launch("layernorm_backward");
  });
}

}  // namespace dt::kernels::cuda
