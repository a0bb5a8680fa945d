// cast on CUDA: any dtype pair, elementwise. As on the CPU, values go through double for
// integers (exact for i64 up to 2^53), floats to integers truncate toward zero with NaN
// becoming 0 and out-of-range values saturating, and floats round once to nearest even.
#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda {
namespace {

template <class T> __device__ __forceinline__ double load_d(T v) {
  if constexpr (std::is_integral_v<T>) return static_cast<double>(v);
  else return ld(v);
}
template <class D> __device__ __forceinline__ D store_d(double v) {
  if constexpr (std::is_integral_v<D>) {
    if (isnan(v)) v = 0;
    // The limits as doubles (std::numeric_limits is host-only without relaxed constexpr).
    constexpr bool wide = sizeof(D) == 8;
    constexpr double lo = wide ? -9223372036854775808.0 : -2147483648.0;
    constexpr double hi = wide ? 9223372036854775807.0 : 2147483647.0;
    v = trunc(fmin(fmax(v, lo), hi));
    if constexpr (wide)
      if (v >= hi) return static_cast<D>(0x7fffffffffffffffll);  // 2^63 itself does not convert
    return static_cast<D>(v);
  } else {
    return st<D>(static_cast<float>(v));
  }
}

template <class S, class D> struct Cast {
  const S* src;
  D* dst;
  __device__ void operator()(int64_t i) const {
    if constexpr (!std::is_integral_v<S> && !std::is_integral_v<D>) dst[i] = st<D>(ld(src[i]));
    else dst[i] = store_d<D>(load_d(src[i]));
  }
};

}  // namespace

void cast(const Tensor& src, Tensor& dst) {
  with_any(src.dtype(), [&](auto s) {
    with_any(dst.dtype(), [&](auto d) {
      using S = typename decltype(s)::type;
      using D = typename decltype(d)::type;
      launch_map(src.device(), src.numel(), Cast<S, D>{ptr<S>(src), ptr<D>(dst)}, "cast");
    });
  });
}

}  // namespace dt::kernels::cuda
