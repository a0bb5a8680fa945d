// SiLU (x * sigmoid(x)) elementwise on the CPU.
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/fast_math.h"

namespace dt::kernels::cpu {
namespace {

constexpr int64_t kSiluGrain = 4096;  // elements per task: exp is costly enough for this to pay

// exp(-v) overflows to Inf for v < -88, giving s = 0 and y = -0, the right limit.

template <class T> void silu_kernel(const T* x, T* y, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) {
    float v = to_f32(x[i]);
    y[i] = from_f32<T>(v * sigmoid(v));
  }
}

// d/dx x s(x) = s (1 + x (1 - s)).
template <class T> void silu_backward_kernel(const T* x, const T* dy, T* dx, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) {
    float v = to_f32(x[i]), s = sigmoid(v);
    dx[i] = from_f32<T>(to_f32(dy[i]) * s * (1.0f + v * (1.0f - s)));
  }
}

}  // namespace

void silu_forward(const Tensor& x, Tensor& y) {
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_for(x.numel(), kSiluGrain, [&](int64_t lo, int64_t hi) { silu_kernel(x.data<T>(), y.data<T>(), lo, hi); });
  });
}

void silu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_for(x.numel(), kSiluGrain, [&](int64_t lo, int64_t hi) {
      silu_backward_kernel(x.data<T>(), dy.data<T>(), dx.data<T>(), lo, hi);
    });
  });
}

}  // namespace dt::kernels::cpu
