// GELU with the tanh approximation (as GPT-2), elementwise on the CPU:
//   y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3).
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/fast_math.h"

namespace dt::kernels::cpu {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
// Elements per task: tanh costs ~20 flops, so a task of 4096 elements is worth a thread.
// tanh is tanh_approx (fast_math.h): std::tanh is a scalar libm call and made GELU over a
// quarter of a GPT training step.
constexpr int64_t kGeluGrain = 4096;

template <class T> void gelu_kernel(const T* x, T* y, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) {
    float v = to_f32(x[i]);
    float t = tanh_approx(kSqrt2OverPi * (v + kCubic * v * v * v));
    y[i] = from_f32<T>(0.5f * v * (1.0f + t));
  }
}

// dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx,  du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
template <class T> void gelu_backward_kernel(const T* x, const T* dy, T* dx, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) {
    float v = to_f32(x[i]);
    float t = tanh_approx(kSqrt2OverPi * (v + kCubic * v * v * v));
    float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    float g = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
    dx[i] = from_f32<T>(to_f32(dy[i]) * g);
  }
}

}  // namespace

void gelu_forward(const Tensor& x, Tensor& y) {
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_for(x.numel(), kGeluGrain, [&](int64_t lo, int64_t hi) { gelu_kernel(x.data<T>(), y.data<T>(), lo, hi); });
  });
}

void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_for(x.numel(), kGeluGrain, [&](int64_t lo, int64_t hi) {
      gelu_backward_kernel(x.data<T>(), dy.data<T>(), dx.data<T>(), lo, hi);
    });
  });
}

}  // namespace dt::kernels::cpu
