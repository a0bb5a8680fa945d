// softmax over the last dim on the CPU: one row per task, max-subtracted for stability.
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_ops.h"

namespace dt::kernels::cpu {
namespace {

template <class T> void softmax_row(const T* x, T* y, int64_t c, float* tmp) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < c; ++j) mx = std::fmax(mx, to_f32(x[j]));
  float sum = 0.0f;
  for (int64_t j = 0; j < c; ++j) {
    tmp[j] = std::exp(to_f32(x[j]) - mx);
    sum += tmp[j];
  }
  float inv = 1.0f / sum;
  for (int64_t j = 0; j < c; ++j) y[j] = from_f32<T>(tmp[j] * inv);
}

// dx = y * (dy - sum(dy * y))
template <class T> void softmax_backward_row(const T* y, const T* dy, T* dx, int64_t c) {
  float dot = 0.0f;
  for (int64_t j = 0; j < c; ++j) dot += to_f32(y[j]) * to_f32(dy[j]);
  for (int64_t j = 0; j < c; ++j) dx[j] = from_f32<T>(to_f32(y[j]) * (to_f32(dy[j]) - dot));
}

}  // namespace

void softmax_forward(const Tensor& x, Tensor& y) {
  int64_t c = x.cols();
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_for(x.rows(), std::max<int64_t>(1, 4096 / c), [&](int64_t r0, int64_t r1) {
      std::vector<float> tmp(c);
      for (int64_t r = r0; r < r1; ++r) softmax_row(x.data<T>() + r * c, y.data<T>() + r * c, c, tmp.data());
    });
  });
}

void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  int64_t c = y.cols();
  dispatch_float(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_for(y.rows(), std::max<int64_t>(1, 4096 / c), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        softmax_backward_row(y.data<T>() + r * c, dy.data<T>() + r * c, dx.data<T>() + r * c, c);
    });
  });
}

}  // namespace dt::kernels::cpu
