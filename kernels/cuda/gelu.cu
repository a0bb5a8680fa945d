// GELU with the tanh approximation (as GPT-2), elementwise on CUDA:
//   y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3).
#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

template <class T> struct GeluFwd {
  const T* x;
  T* y;
  __device__ void operator()(int64_t i) const {
    float v = ld(x[i]);
    y[i] = st<T>(0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kCubic * v * v * v))));
  }
};

// dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx,  du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
template <class T> struct GeluBwd {
  const T *x, *dy;
  T* dx;
  __device__ void operator()(int64_t i) const {
    float v = ld(x[i]), t = tanhf(kSqrt2OverPi * (v + kCubic * v * v * v));
    float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    dx[i] = st<T>(ld(dy[i]) * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du));
  }
};

}  // namespace

void gelu_forward(const Tensor& x, Tensor& y) {
  with_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(x.device(), x.numel(), GeluFwd<T>{ptr<T>(x), ptr<T>(y)}, "gelu_forward");
  });
}

void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  with_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(x.device(), x.numel(), GeluBwd<T>{ptr<T>(x), ptr<T>(dy), ptr<T>(dx)}, "gelu_backward");
  });
}

}  // namespace dt::kernels::cuda
