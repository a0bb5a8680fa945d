// reduce on the CPU: dst[i] = op(srcs[0][i], ..., srcs[n-1][i]). Elements go in tiles: a
// tile of srcs[0] is loaded into an accumulator, every other source is folded in, in source
// order, then the tile is rounded once and stored. Because a tile is fully read before it
// is written, dst may alias srcs[0]. Floating types accumulate in f32 (a vectorized fold);
// integers in int64, with wrapping sum and product as two's-complement hardware would.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/update_rules.h"

namespace dt::kernels::cpu {
namespace {

constexpr int64_t kTile = 512;

template <class T> using Acc = rules::ReduceAcc<T>;

template <class T> inline Acc<T> load(T x) {
  if constexpr (std::is_integral_v<T>) return x;
  else return to_f32(x);
}
template <class T> inline T store(Acc<T> x) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(x);  // i32 keeps the low 32 bits
  else return from_f32<T>(x);
}

using rules::combine;

template <class T, ReduceOp OP>
void reduce_tile(const void* const* srcs, int nsrc, T* dst, int64_t lo, int64_t n) {
  Acc<T> acc[kTile];
  const T* s0 = static_cast<const T*>(srcs[0]) + lo;
  for (int64_t i = 0; i < n; ++i) acc[i] = load(s0[i]);
  for (int s = 1; s < nsrc; ++s) {
    const T* x = static_cast<const T*>(srcs[s]) + lo;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) acc[i] = combine<OP>(acc[i], load(x[i]));
  }
  if constexpr (OP == ReduceOp::Avg) {
    // Integer division truncates toward zero, as documented for integer Avg.
    Acc<T> div = static_cast<Acc<T>>(nsrc);
    for (int64_t i = 0; i < n; ++i) acc[i] = acc[i] / div;
  }
  for (int64_t i = 0; i < n; ++i) dst[lo + i] = store<T>(acc[i]);
}

template <class T, ReduceOp OP> void reduce_typed(const void* const* srcs, int nsrc, void* dst, int64_t count) {
  T* out = static_cast<T*>(dst);
  int64_t tiles = (count + kTile - 1) / kTile;
  // About 64K elements per chunk at least, so small buffers stay on the calling thread.
  parallel_for(tiles, std::max<int64_t>(1, (64 * 1024) / kTile), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t lo = t * kTile;
      reduce_tile<T, OP>(srcs, nsrc, out, lo, std::min(kTile, count - lo));
    }
  });
}

template <class T> void reduce_op(ReduceOp op, const void* const* srcs, int nsrc, void* dst, int64_t count) {
  switch (op) {
    case ReduceOp::Sum: return reduce_typed<T, ReduceOp::Sum>(srcs, nsrc, dst, count);
    case ReduceOp::Avg: return reduce_typed<T, ReduceOp::Avg>(srcs, nsrc, dst, count);
    case ReduceOp::Max: return reduce_typed<T, ReduceOp::Max>(srcs, nsrc, dst, count);
    case ReduceOp::Min: return reduce_typed<T, ReduceOp::Min>(srcs, nsrc, dst, count);
    case ReduceOp::Prod: return reduce_typed<T, ReduceOp::Prod>(srcs, nsrc, dst, count);
  }
}

}  // namespace

void reduce(ReduceOp op, DType dtype, Device device, const void* const* srcs, int nsrc, void* dst, int64_t count) {
  switch (dtype) {
    case DType::I32: return reduce_op<int32_t>(op, srcs, nsrc, dst, count);
    case DType::I64: return reduce_op<int64_t>(op, srcs, nsrc, dst, count);
    default:
      dispatch_float(dtype, [&](auto tag) { reduce_op<decltype(tag)>(op, srcs, nsrc, dst, count); });
  }
}

}  // namespace dt::kernels::cpu
