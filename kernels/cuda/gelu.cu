// GELU with the tanh approximation (as GPT-2), elementwise on CUDA:
//   y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3).
#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

__device__ inline float gelu_value(float v) {
  return 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kCubic * v * v * v)));
}
// dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx,  du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
__device__ inline float gelu_slope(float v) {
  const float t = tanhf(kSqrt2OverPi * (v + kCubic * v * v * v));
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
  return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
}

// b is null for plain GELU; else the bias of column i % c is added first.
template <class T> struct GeluFwd {
  const T *x, *b;
  T* y;
  int64_t c;
  __device__ void operator()(int64_t i) const { y[i] = st<T>(gelu_value(ld(x[i]) + (b ? ld(b[i % c]) : 0.0f))); }
};

template <class T> struct GeluBwd {
  const T *x, *b, *dy;
  T* dx;
  int64_t c;
  __device__ float grad(int64_t i) const { return ld(dy[i]) * gelu_slope(ld(x[i]) + (b ? ld(b[i % c]) : 0.0f)); }
  __device__ void operator()(int64_t i) const { dx[i] = st<T>(grad(i)); }
};
// dbias: the unrounded gradient again, summed over rows by colsum_accumulate.
template <class T> struct GeluBwdColumn {
  GeluBwd<T> g;
  __device__ float operator()(int64_t r, int64_t j) const { return g.grad(r * g.c + j); }
};

}  // namespace

void gelu_forward(const Tensor& x, Tensor& y) {
  with_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(x.device(), x.numel(), GeluFwd<T>{ptr<T>(x), nullptr, ptr<T>(y), 1}, "gelu_forward");
  });
}

void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  with_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(x.device(), x.numel(), GeluBwd<T>{ptr<T>(x), nullptr, ptr<T>(dy), ptr<T>(dx), 1}, "gelu_backward");
  });
}

void bias_gelu_forward(const Tensor& x, const Tensor& bias, Tensor& y) {
  with_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(x.device(), x.numel(), GeluFwd<T>{ptr<T>(x), ptr<T>(bias), ptr<T>(y), x.cols()}, "bias_gelu_forward");
  });
}

void bias_gelu_backward(const Tensor& x, const Tensor& bias, const Tensor& dy, Tensor& dx, Tensor& dbias) {
  with_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const GeluBwd<T> g{ptr<T>(x), ptr<T>(bias), ptr<T>(dy), ptr<T>(dx), x.cols()};
    launch_map(x.device(), x.numel(), g, "bias_gelu_backward");
    colsum_accumulate(x.device(), x.rows(), x.cols(), GeluBwdColumn<T>{g}, ptr<T>(dbias), "bias_gelu_backward");
  });
}

}  // namespace dt::kernels::cuda
