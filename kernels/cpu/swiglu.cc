// SwiGLU, y = silu(gate) * up, elementwise on the CPU.
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/fast_math.h"

namespace dt::kernels::cpu {
namespace {

constexpr int64_t kSwigluGrain = 4096;  // elements per task: exp is costly enough for this to pay


template <class T> void swiglu_kernel(const T* gate, const T* up, T* y, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) {
    float g = to_f32(gate[i]);
    y[i] = from_f32<T>(g * sigmoid(g) * to_f32(up[i]));
  }
}

// dgate = dy * up * s (1 + g (1 - s)), dup = dy * g * s. Both read before either is written,
// so dgate or dup may alias gate, up or dy element for element.
template <class T>
void swiglu_backward_kernel(const T* gate, const T* up, const T* dy, T* dgate, T* dup, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) {
    float g = to_f32(gate[i]), u = to_f32(up[i]), d = to_f32(dy[i]), s = sigmoid(g);
    dgate[i] = from_f32<T>(d * u * s * (1.0f + g * (1.0f - s)));
    dup[i] = from_f32<T>(d * g * s);
  }
}

}  // namespace

void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& y) {
  dispatch_float(gate.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_for(gate.numel(), kSwigluGrain, [&](int64_t lo, int64_t hi) {
      swiglu_kernel(gate.data<T>(), up.data<T>(), y.data<T>(), lo, hi);
    });
  });
}

void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy, Tensor& dgate, Tensor& dup) {
  dispatch_float(gate.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_for(gate.numel(), kSwigluGrain, [&](int64_t lo, int64_t hi) {
      swiglu_backward_kernel(gate.data<T>(), up.data<T>(), dy.data<T>(), dgate.data<T>(), dup.data<T>(), lo, hi);
    });
  });
}

}  // namespace dt::kernels::cpu
