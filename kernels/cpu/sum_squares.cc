// sum of squares on the CPU, in f64 (the global grad norm for clipping). The sum is over
// fixed blocks, whose partial sums are then added in block order: the result does not
// depend on the thread count. Inf and NaN propagate.
#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/row_f32.h"

namespace dt::kernels::cpu {
namespace {

constexpr int64_t kBlock = 4096;  // elements per partial sum, fixed whatever the pool size

template <class T> double block_sum_squares(const T* x, int64_t n, float* buf) {
  const float* xf = row_f32(x, n, buf);
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(xf[i]) * static_cast<double>(xf[i]);
  return s;
}

}  // namespace

double sum_squares(const Tensor& x) {
  int64_t n = x.numel(), blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(blocks);
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.data<T>();
    parallel_for(blocks, 8, [&](int64_t b0, int64_t b1) {
      std::vector<float> buf(kBlock);
      for (int64_t b = b0; b < b1; ++b)
        partial[b] = block_sum_squares(p + b * kBlock, std::min(kBlock, n - b * kBlock), buf.data());
    });
  });
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace dt::kernels::cpu
