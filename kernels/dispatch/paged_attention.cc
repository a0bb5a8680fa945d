// paged_attention_forward, kv_cache_write: validation and dispatch (contracts in kernels/ops.h).
// The index tensors' values are checked when they are on the host; device-resident ones are
// built by the serving engine from host copies it has checked (nn/paged_kv.h).
#include <cmath>

#include "kernels/check.h"

namespace dt::kernels {
namespace {

void check_cache(const char* op, const Tensor& k_cache, const Tensor& v_cache) {
  require_float(op, {k_cache, "k_cache"});
  DT_CHECK(k_cache.ndim() == 4, std::string(op) + ": k_cache has shape " + shape_str(k_cache.shape()) +
                                    "; required: [num_blocks, block_size, Hkv, D]");
  require_same_shape(op, {{k_cache, "k_cache"}, {v_cache, "v_cache"}});
  for (int i = 0; i < 4; ++i)
    DT_CHECK(k_cache.dim(i) >= 1, std::string(op) + ": k_cache has shape " + shape_str(k_cache.shape()) +
                                      "; required: every dimension >= 1");
}

}  // namespace

void paged_attention_forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& seqs,
                             const Tensor& tables, float scale, Tensor& out) {
  const char* op = "paged_attention_forward";
  require_float(op, {q, "q"});
  DT_CHECK(q.ndim() == 3, std::string(op) + ": q has shape " + shape_str(q.shape()) + "; required: [N, Hq, D]");
  check_cache(op, k_cache, v_cache);
  require_same_shape(op, {{q, "q"}, {out, "out"}});
  require_same_dtype(op, {{q, "q"}, {k_cache, "k_cache"}, {v_cache, "v_cache"}, {out, "out"}});
  const int64_t N = q.dim(0), hq = q.dim(1), d = q.dim(2), nb = k_cache.dim(0), bs = k_cache.dim(1),
                hkv = k_cache.dim(2);
  DT_CHECK(k_cache.dim(3) == d && hq % hkv == 0,
           std::string(op) + ": k_cache " + shape_str(k_cache.shape()) + " does not fit q " + shape_str(q.shape()) +
               "; required: the same D, Hq a multiple of Hkv");
  require_dtype(op, {seqs, "seqs"}, DType::I32);
  require_dtype(op, {tables, "tables"}, DType::I32);
  DT_CHECK(seqs.ndim() == 2 && seqs.dim(1) == 3 && tables.ndim() == 2 && tables.dim(0) == seqs.dim(0),
           std::string(op) + ": seqs " + shape_str(seqs.shape()) + ", tables " + shape_str(tables.shape()) +
               "; required: [S, 3] and [S, max_blocks]");
  DT_CHECK(std::isfinite(scale), std::string(op) + ": scale is " + std::to_string(scale) + "; accepted: finite");
  require_same_device(op, {{q, "q"}, {k_cache, "k_cache"}, {v_cache, "v_cache"}, {seqs, "seqs"},
                           {tables, "tables"}, {out, "out"}});
  if (seqs.device().type == DeviceType::CPU) {
    const int32_t *sp = seqs.data<int32_t>(), *tp = tables.data<int32_t>();
    const int64_t mb = tables.dim(1);
    int64_t next_free = 0;  // sequences cover disjoint rows, in order
    for (int64_t s = 0; s < seqs.dim(0); ++s) {
      const int64_t first = sp[3 * s], n = sp[3 * s + 1], len = sp[3 * s + 2];
      DT_CHECK(first >= next_free && n >= 1 && first + n <= N && len >= n && (len + bs - 1) / bs <= mb,
               std::string(op) + ": seqs row " + std::to_string(s) + " = (" + std::to_string(first) + ", " +
                   std::to_string(n) + ", " + std::to_string(len) + "); required: rows of q after the previous "
                   "sequence's, n >= 1, n <= L, and L within the table's " + std::to_string(mb) + " blocks");
      next_free = first + n;
      for (int64_t b = 0; b < (len + bs - 1) / bs; ++b)
        DT_CHECK(tp[s * mb + b] >= 0 && tp[s * mb + b] < nb,
                 std::string(op) + ": tables[" + std::to_string(s) + ", " + std::to_string(b) + "] = " +
                     std::to_string(tp[s * mb + b]) + "; accepted: [0, num_blocks = " + std::to_string(nb) + ")");
    }
  }
  DT_BACKEND(q, paged_attention_forward)(q, k_cache, v_cache, seqs, tables, scale, out);
}

void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_cache, Tensor& v_cache) {
  const char* op = "kv_cache_write";
  check_cache(op, k_cache, v_cache);
  require_same_shape(op, {{k, "k"}, {v, "v"}});
  require_same_dtype(op, {{k, "k"}, {v, "v"}, {k_cache, "k_cache"}, {v_cache, "v_cache"}});
  DT_CHECK(k.ndim() == 3 && k.dim(1) == k_cache.dim(2) && k.dim(2) == k_cache.dim(3),
           std::string(op) + ": k has shape " + shape_str(k.shape()) + ", the cache " + shape_str(k_cache.shape()) +
               "; required: [N, Hkv, D] of the cache's Hkv and D");
  require_dtype(op, {slots, "slots"}, DType::I32);
  require_shape(op, {slots, "slots"}, {k.dim(0)});
  require_same_device(op, {{k, "k"}, {v, "v"}, {slots, "slots"}, {k_cache, "k_cache"}, {v_cache, "v_cache"}});
  if (slots.device().type == DeviceType::CPU) {
    const int64_t cap = k_cache.dim(0) * k_cache.dim(1);
    for (int64_t i = 0; i < slots.numel(); ++i)
      DT_CHECK(slots.data<int32_t>()[i] >= 0 && slots.data<int32_t>()[i] < cap,
               std::string(op) + ": slots[" + std::to_string(i) + "] = " + std::to_string(slots.data<int32_t>()[i]) +
                   "; accepted: [0, num_blocks * block_size = " + std::to_string(cap) + ")");
  }
  DT_BACKEND(k, kv_cache_write)(k, v, slots, k_cache, v_cache);
}

}  // namespace dt::kernels
