// fill, scale and add on the CPU: element by element, in f32, split over the pool.
#include <algorithm>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_ops.h"

namespace dt::kernels::cpu {
namespace {

// Elements per task: these ops are memory bound, so a task must move a lot to pay.
constexpr int64_t kFillGrain = 1 << 15;

template <class T> void add_kernel(const T* a, const T* b, T* out, int64_t lo, int64_t hi) {
  // Each element is read before it is written, so out may alias a or b.
  for (int64_t i = lo; i < hi; ++i) out[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i]));
}

}  // namespace

void fill(Tensor& x, float value) {
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T v = from_f32<T>(value);
    T* p = x.data<T>();
    parallel_for(x.numel(), kFillGrain, [&](int64_t lo, int64_t hi) { std::fill(p + lo, p + hi, v); });
  });
}

void scale(Tensor& x, float alpha) {
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = x.data<T>();
    parallel_for(x.numel(), kFillGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) p[i] = from_f32<T>(to_f32(p[i]) * alpha);
    });
  });
}

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  dispatch_float(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_for(a.numel(), kFillGrain, [&](int64_t lo, int64_t hi) {
      add_kernel(a.data<T>(), b.data<T>(), out.data<T>(), lo, hi);
    });
  });
}

}  // namespace dt::kernels::cpu
