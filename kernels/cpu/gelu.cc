// GELU with the tanh approximation (as GPT-2), elementwise on the CPU:
//   y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3).
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/row_f32.h"

namespace dt::kernels::cpu {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
// Elements per task: tanh costs ~20 flops, so a task of 4096 elements is worth a thread.
// tanh is tanh_approx (fast_math.h): std::tanh is a scalar libm call and made GELU over a
// quarter of a GPT training step.
constexpr int64_t kGeluGrain = 4096;

inline float gelu_value(float v) {
  const float t = tanh_approx(kSqrt2OverPi * (v + kCubic * v * v * v));
  return 0.5f * v * (1.0f + t);
}
// dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx,  du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
inline float gelu_slope(float v) {
  const float t = tanh_approx(kSqrt2OverPi * (v + kCubic * v * v * v));
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
  return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
}

template <class T> void gelu_kernel(const T* x, T* y, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) y[i] = from_f32<T>(gelu_value(to_f32(x[i])));
}

template <class T> void gelu_backward_kernel(const T* x, const T* dy, T* dx, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) dx[i] = from_f32<T>(to_f32(dy[i]) * gelu_slope(to_f32(x[i])));
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

// One row per task, as bias_add: y = gelu(x + bias) without writing x + bias anywhere.
void bias_gelu_forward(const Tensor& x, const Tensor& bias, Tensor& y) {
  const int64_t c = x.cols();
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_for(x.rows(), grain_for(c), [&](int64_t r0, int64_t r1) {
      std::vector<float> bbuf(c);
      const float* b = row_f32(bias.data<T>(), c, bbuf.data());
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = x.data<T>() + r * c;
        T* yr = y.data<T>() + r * c;
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) yr[j] = from_f32<T>(gelu_value(to_f32(xr[j]) + b[j]));
      }
    });
  });
}

// Split over columns as bias_backward (parallel_over_columns): a task owns columns
// [c0, c1), writes their dx and sums them over the rows in row order.
void bias_gelu_backward(const Tensor& x, const Tensor& bias, const Tensor& dy, Tensor& dx, Tensor& dbias) {
  const int64_t c = x.cols(), rows = x.rows();
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_over_columns(rows, c, [&](int64_t c0, int64_t c1) {
      const int64_t n = c1 - c0;
      std::vector<float> acc(n, 0.0f), bbuf(n);
      const float* b = row_f32(bias.data<T>() + c0, n, bbuf.data());
      for (int64_t r = 0; r < rows; ++r) {
        const T *xr = x.data<T>() + r * c + c0, *dyr = dy.data<T>() + r * c + c0;
        T* dxr = dx.data<T>() + r * c + c0;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) {
          const float g = to_f32(dyr[j]) * gelu_slope(to_f32(xr[j]) + b[j]);
          dxr[j] = from_f32<T>(g);
          acc[j] += g;
        }
      }
      accumulate_row(acc.data(), n, dbias.data<T>() + c0);
    });
  });
}

}  // namespace dt::kernels::cpu
