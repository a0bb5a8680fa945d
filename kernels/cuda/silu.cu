// SiLU, y = x sigmoid(x), elementwise on CUDA.
#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda {
namespace {

template <class T> struct SiluFwd {
  const T* x;
  T* y;
  __device__ void operator()(int64_t i) const {
    float v = ld(x[i]);
    y[i] = st<T>(v * sigmoid(v));
  }
};

// d/dx x s(x) = s (1 + x (1 - s)).
template <class T> struct SiluBwd {
  const T *x, *dy;
  T* dx;
  __device__ void operator()(int64_t i) const {
    float v = ld(x[i]), s = sigmoid(v);
    dx[i] = st<T>(ld(dy[i]) * s * (1.0f + v * (1.0f - s)));
  }
};

}  // namespace

void silu_forward(const Tensor& x, Tensor& y) {
  with_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(x.device(), x.numel(), SiluFwd<T>{ptr<T>(x), ptr<T>(y)}, "silu_forward");
  });
}

void silu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  with_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(x.device(), x.numel(), SiluBwd<T>{ptr<T>(x), ptr<T>(dy), ptr<T>(dx)}, "silu_backward");
  });
}

}  // namespace dt::kernels::cuda
