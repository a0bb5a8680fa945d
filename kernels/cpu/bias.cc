// bias_add and bias_backward on the CPU. bias_add: one row per task. bias_backward: split
// over columns (parallel_over_columns), so dbias is bitwise independent of the thread count.
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/row_f32.h"

namespace dt::kernels::cpu {

void bias_add(Tensor& y, const Tensor& bias) {
  int64_t c = y.cols();
  dispatch_float(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_for(y.rows(), grain_for(c), [&](int64_t r0, int64_t r1) {
      std::vector<float> bbuf(c);
      const float* bf = row_f32(bias.data<T>(), c, bbuf.data());
      for (int64_t r = r0; r < r1; ++r) accumulate_row(bf, c, y.data<T>() + r * c);
    });
  });
}

void bias_backward(const Tensor& dy, Tensor& dbias) {
  int64_t c = dy.cols(), rows = dy.rows();
  dispatch_float(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_over_columns(rows, c, [&](int64_t c0, int64_t c1) {
      int64_t n = c1 - c0;
      std::vector<float> acc(n, 0.0f), buf(n);
      for (int64_t r = 0; r < rows; ++r) {
        const float* d = row_f32(dy.data<T>() + r * c + c0, n, buf.data());
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) acc[j] += d[j];
      }
      accumulate_row(acc.data(), n, dbias.data<T>() + c0);
    });
  });
}

}  // namespace dt::kernels::cpu
