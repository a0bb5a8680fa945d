// Rows of any floating storage type seen as f32, so that the inner loops of the row
// kernels are plain f32 loops the compiler vectorizes, and f32 storage is never copied.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace dt::kernels::cpu {

// p[0, n) as f32: p itself for f32 storage, else widened into buf (n floats).
template <class T> const float* row_f32(const T* p, int64_t n, float* buf) {
  if constexpr (std::is_same_v<T, float>) {
    return p;
  } else {
    for (int64_t j = 0; j < n; ++j) buf[j] = to_f32(p[j]);
    return buf;
  }
}

// Where a kernel writes an f32 row bound for p: p itself for f32 storage, else buf;
// store_row then rounds buf into p (a no-op for f32).
template <class T> float* out_f32(T* p, float* buf) {
  if constexpr (std::is_same_v<T, float>) return p;
  else return buf;
}
template <class T> void store_row(const float* src, int64_t n, T* p) {
  if constexpr (!std::is_same_v<T, float>)
    for (int64_t j = 0; j < n; ++j) p[j] = from_f32<T>(src[j]);
}

// p[j] += add[j] for j in [0, n), rounding once per element.
template <class T> void accumulate_row(const float* add, int64_t n, T* p) {
  for (int64_t j = 0; j < n; ++j) p[j] = from_f32<T>(to_f32(p[j]) + add[j]);
}

// Work items of about kTaskWork elements per task, so tiny tensors stay serial.
constexpr int64_t kTaskWork = 4096;
inline int64_t grain_for(int64_t work_per_item) {
  return work_per_item >= kTaskWork ? 1 : kTaskWork / (work_per_item > 0 ? work_per_item : 1);
}

// Parameter-gradient reductions over rows (dweight, dbias): fn(c0, c1) owns columns
// [c0, c1) and sums every row in row order, so each column's sum is the same whatever the
// thread count. Blocks of whole cache lines keep threads off each other's lines.
constexpr int64_t kColBlock = 32;
template <class Fn> void parallel_over_columns(int64_t rows, int64_t c, Fn&& fn) {
  int64_t blocks = (c + kColBlock - 1) / kColBlock;
  parallel_for(blocks, grain_for(rows * kColBlock),
               [&](int64_t b0, int64_t b1) { fn(b0 * kColBlock, std::min(c, b1 * kColBlock)); });
}

}  // namespace dt::kernels::cpu
