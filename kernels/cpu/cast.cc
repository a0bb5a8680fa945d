// cast on the CPU: any dtype pair, element by element, split over the pool.
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_ops.h"

namespace dt::kernels::cpu {
namespace {

template <class S> double load(const S* p, int64_t i) {
  if constexpr (std::is_same_v<S, int32_t> || std::is_same_v<S, int64_t>) return static_cast<double>(p[i]);
  else return to_f32(p[i]);
}

template <class D> void store(D* p, int64_t i, double v) {
  if constexpr (std::is_same_v<D, int32_t> || std::is_same_v<D, int64_t>) {
    // NaN becomes 0 and out-of-range values saturate, rather than being undefined.
    if (std::isnan(v)) v = 0;
    v = std::trunc(std::fmin(std::fmax(v, static_cast<double>(std::numeric_limits<D>::min())),
                             static_cast<double>(std::numeric_limits<D>::max())));
    // For i64 the top is 2^63 as a double, which does not convert: it saturates explicitly.
    if (v >= static_cast<double>(std::numeric_limits<D>::max())) {
      p[i] = std::numeric_limits<D>::max();
      return;
    }
    p[i] = static_cast<D>(v);
  } else {
    p[i] = from_f32<D>(static_cast<float>(v));
  }
}

template <class S, class D> void cast_kernel(const S* src, D* dst, int64_t lo, int64_t hi) {
  constexpr bool s_float = !std::is_same_v<S, int32_t> && !std::is_same_v<S, int64_t>;
  constexpr bool d_float = !std::is_same_v<D, int32_t> && !std::is_same_v<D, int64_t>;
  if constexpr (s_float && d_float) {  // through f32 (exact for every float pair), 16 lanes at a time
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) dst[i] = from_f32<D>(to_f32(src[i]));
  } else {
    for (int64_t i = lo; i < hi; ++i) store(dst, i, load(src, i));
  }
}

// Calls fn with a value of the storage type of any dtype.
template <class Fn> void dispatch_any(DType t, Fn&& fn) {
  if (t == DType::I32) fn(int32_t{});
  else if (t == DType::I64) fn(int64_t{});
  else dispatch_float(t, fn);
}

}  // namespace

void cast(const Tensor& src, Tensor& dst) {
  dispatch_any(src.dtype(), [&](auto s) {
    dispatch_any(dst.dtype(), [&](auto d) {
      using S = decltype(s);
      using D = decltype(d);
      const S* in = src.data<S>();
      D* out = dst.data<D>();
      parallel_for(src.numel(), 1 << 15, [&](int64_t lo, int64_t hi) { cast_kernel(in, out, lo, hi); });
    });
  });
}

}  // namespace dt::kernels::cpu
