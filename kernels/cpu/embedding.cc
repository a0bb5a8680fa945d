// Embedding lookup and its gradient on the CPU. Every id is checked before anything is
// written, so a bad id leaves out / dtable untouched. A negative id is "no row" (ids that a
// vocab-parallel embedding's other ranks own): a zero row forward, no gradient backward.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/row_f32.h"

namespace dt::kernels::cpu {
namespace {

void check_ids(const char* op, const Tensor& ids, int64_t v) {
  const int32_t* id = ids.data<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (id[i] >= v)
      invalid(std::string(op) + ": ids row " + std::to_string(i) + " holds id " + std::to_string(id[i]) +
              ", out of range; accepted: [0, " + std::to_string(v) + "), the rows of the table, or < 0 for no row");
  }
}

}  // namespace

void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out) {
  int64_t v = table.dim(0), c = table.dim(1);
  check_ids("embedding_forward", ids, v);
  const int32_t* id = ids.data<int32_t>();
  size_t row_bytes = static_cast<size_t>(c) * dtype_size(table.dtype());
  const char* src = static_cast<const char*>(table.raw());
  char* dst = static_cast<char*>(out.raw());
  // A pure copy: every storage type moves as bytes, in tasks of >= 32K elements as cast does.
  parallel_for(ids.numel(), std::max<int64_t>(1, (1 << 15) / c), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (id[r] >= 0) std::memcpy(dst + r * row_bytes, src + id[r] * row_bytes, row_bytes);
      else std::memset(dst + r * row_bytes, 0, row_bytes);  // all-zero bytes are +0 in every float type
    }
  });
}

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable) {
  int64_t v = dtable.dim(0), c = dtable.dim(1), n = ids.numel();
  check_ids("embedding_backward", ids, v);
  const int32_t* id = ids.data<int32_t>();
  // Rows of dout with an id (negative ids contribute nothing) grouped by id, in row order
  // within a group (stable sort): each touched row of dtable is then summed by one task in
  // row order, independent of the thread count, in f32, and rounded into dtable once.
  std::vector<int64_t> order;
  order.reserve(n);
  for (int64_t i = 0; i < n; ++i)
    if (id[i] >= 0) order.push_back(i);
  int64_t kept = static_cast<int64_t>(order.size());
  if (kept == 0) return;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return id[a] < id[b]; });
  std::vector<int64_t> starts;  // where each group begins in `order`, then kept
  for (int64_t k = 0; k < kept; ++k)
    if (k == 0 || id[order[k]] != id[order[k - 1]]) starts.push_back(k);
  starts.push_back(kept);
  int64_t groups = static_cast<int64_t>(starts.size()) - 1;
  dispatch_float(dtable.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* d = dout.data<T>();
    T* grad = dtable.data<T>();
    parallel_for(groups, grain_for(c * kept / groups), [&](int64_t g0, int64_t g1) {
      std::vector<float> acc(c), buf(c);
      for (int64_t g = g0; g < g1; ++g) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t k = starts[g]; k < starts[g + 1]; ++k) {
          const float* dr = row_f32(d + order[k] * c, c, buf.data());
#pragma omp simd
          for (int64_t j = 0; j < c; ++j) acc[j] += dr[j];
        }
        accumulate_row(acc.data(), c, grad + id[order[starts[g]]] * c);
      }
    });
  });
}

}  // namespace dt::kernels::cpu
