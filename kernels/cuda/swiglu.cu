// SwiGLU, y = silu(gate) * up, elementwise on CUDA.
#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda {
namespace {

template <class T> struct SwigluFwd {
  const T *gate, *up;
  T* y;
  __device__ void operator()(int64_t i) const {
    float g = ld(gate[i]);
    y[i] = st<T>(g * sigmoid(g) * ld(up[i]));
  }
};

// dgate = dy * up * s (1 + g (1 - s)), dup = dy * g * s; both read before either is written.
template <class T> struct SwigluBwd {
  const T *gate, *up, *dy;
  T *dgate, *dup;
  __device__ void operator()(int64_t i) const {
    float g = ld(gate[i]), u = ld(up[i]), d = ld(dy[i]), s = sigmoid(g);
    dgate[i] = st<T>(d * u * s * (1.0f + g * (1.0f - s)));
    dup[i] = st<T>(d * g * s);
  }
};

}  // namespace

void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& y) {
  with_float(gate.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(gate.device(), gate.numel(), SwigluFwd<T>{ptr<T>(gate), ptr<T>(up), ptr<T>(y)}, "swiglu_forward");
  });
}

void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy, Tensor& dgate, Tensor& dup) {
  with_float(gate.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(gate.device(), gate.numel(),
               SwigluBwd<T>{ptr<T>(gate), ptr<T>(up), ptr<T>(dy), ptr<T>(dgate), ptr<T>(dup)}, "swiglu_backward");
  });
}

}  // namespace dt::kernels::cuda
