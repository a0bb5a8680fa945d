// Attention over a paged KV cache on the CPU. A task is (sequence, query head, tile of
// queries): it stages the keys and values its tile may see from their blocks into
// per-thread f32 scratch (the tile's working set, as a GPU kernel loads it into shared
// memory; never a copy of the cache), then runs the same attention_tile as the contiguous
// kernel, so a query gets exactly the bits attention_forward would give it.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/gemm_path.h"

namespace dt::kernels::cpu {
namespace {

struct SeqSpan {
  int64_t first, n, len;
};

// Widens n elements of dtype dt at src into f32 dst.
void widen_row(DType dt, const void* src, float* dst, int64_t n) {
  if (dt == DType::F32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  if (dt == DType::BF16)
    for (int64_t i = 0; i < n; ++i) dst[i] = to_f32(static_cast<const bf16*>(src)[i]);
  else
    for (int64_t i = 0; i < n; ++i) dst[i] = to_f32(static_cast<const f16*>(src)[i]);
}

// The bf16 path on the native bf16 GEMM: keys and values staged as bf16 (no widening), attention_tile_bf16.
void paged_bf16_native(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const std::vector<SeqSpan>& span,
                    const std::vector<int64_t>& task_begin, const int32_t* tp, int64_t max_blocks, int64_t longest,
                    float scale, Tensor& out) {
  const int64_t Hq = q.dim(1), D = q.dim(2), bs = k_cache.dim(1), Hkv = k_cache.dim(2), group = Hq / Hkv;
  const int64_t S = static_cast<int64_t>(span.size());
  const uint16_t* qp = reinterpret_cast<const uint16_t*>(q.data<bf16>());
  uint16_t* op = reinterpret_cast<uint16_t*>(out.data<bf16>());
  const auto *kp = reinterpret_cast<const uint16_t*>(k_cache.data<bf16>()),
             *vp = reinterpret_cast<const uint16_t*>(v_cache.data<bf16>());
  parallel_for(task_begin[S], 1, [&](int64_t t0, int64_t t1) {
    std::vector<uint16_t> ks(static_cast<size_t>(longest * D)), vs(static_cast<size_t>(longest * D));
    TileScratch sc;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t s = std::upper_bound(task_begin.begin(), task_begin.end(), t) - task_begin.begin() - 1;
      const SeqSpan& c = span[s];
      const int64_t local = t - task_begin[s], h = local % Hq, blk = local / Hq, g = h / group;
      const int64_t i0 = blk * kQueryBlock, m = std::min(kQueryBlock, c.n - i0);
      const int64_t kend = c.len - c.n + i0 + m;
      for (int64_t p = 0; p < kend; ++p) {
        const int64_t off = ((tp[s * max_blocks + p / bs] * bs + p % bs) * Hkv + g) * D;
        std::memcpy(ks.data() + p * D, kp + off, sizeof(uint16_t) * D);
        std::memcpy(vs.data() + p * D, vp + off, sizeof(uint16_t) * D);
      }
      const int64_t row = (c.first + i0) * Hq + h;
      attention_tile_bf16(qp + row * D, Hq * D, ks.data(), vs.data(), D, m, kend, kend - m + 1, D, scale, op + row * D, nullptr, sc);
    }
  });
}

}  // namespace

void paged_attention_forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& seqs,
                             const Tensor& tables, float scale, Tensor& out) {
  const int64_t Hq = q.dim(1), D = q.dim(2), bs = k_cache.dim(1), Hkv = k_cache.dim(2);
  const int64_t S = seqs.dim(0), max_blocks = tables.dim(1), group = Hq / Hkv;
  if (scale <= 0.0f) scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int32_t* sp = seqs.data<int32_t>();
  const int32_t* tp = tables.data<int32_t>();
  std::vector<SeqSpan> span(static_cast<size_t>(S));
  std::vector<int64_t> task_begin(static_cast<size_t>(S) + 1, 0);  // tasks of sequence s: [begin[s], begin[s+1])
  int64_t longest = 1;
  for (int64_t s = 0; s < S; ++s) {
    span[s] = {sp[3 * s], sp[3 * s + 1], sp[3 * s + 2]};
    longest = std::max(longest, span[s].len);
    task_begin[s + 1] = task_begin[s] + Hq * ((span[s].n + kQueryBlock - 1) / kQueryBlock);
  }
  const DType dt = q.dtype();
  if (dt == DType::BF16 && gemm_choice().bf16_native)
    return paged_bf16_native(q, k_cache, v_cache, span, task_begin, tp, max_blocks, longest, scale, out);
  const Tensor q32 = dt == DType::F32 ? q : Tensor::uninit(q.shape(), DType::F32);
  if (dt != DType::F32) cast(q, const_cast<Tensor&>(q32));
  Tensor o32 = dt == DType::F32 ? out : Tensor::uninit(out.shape(), DType::F32);
  if (dt != DType::F32) cast(out, o32);  // rows no sequence covers stay as they were
  const float* qp = q32.data<float>();
  float* op = o32.data<float>();
  const size_t elem = dtype_size(dt);
  const char *kp = static_cast<const char*>(k_cache.raw()), *vp = static_cast<const char*>(v_cache.raw());
  // Every task writes only its own rows, so the split over threads never changes a bit.
  parallel_for(task_begin[S], 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> strip(static_cast<size_t>(kQueryBlock * longest)), ks(static_cast<size_t>(longest * D)),
        vs(static_cast<size_t>(longest * D));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t s = std::upper_bound(task_begin.begin(), task_begin.end(), t) - task_begin.begin() - 1;
      const SeqSpan& c = span[s];
      const int64_t local = t - task_begin[s], h = local % Hq, blk = local / Hq, g = h / group;
      const int64_t i0 = blk * kQueryBlock, m = std::min(kQueryBlock, c.n - i0);
      const int64_t kend = c.len - c.n + i0 + m;  // one past the last key of the tile's last query
      for (int64_t p = 0; p < kend; ++p) {       // stage the keys and values from their blocks
        const int64_t block = tp[s * max_blocks + p / bs];
        const size_t off = static_cast<size_t>(((block * bs + p % bs) * Hkv + g) * D) * elem;
        widen_row(dt, kp + off, ks.data() + p * D, D);
        widen_row(dt, vp + off, vs.data() + p * D, D);
      }
      const int64_t row = (c.first + i0) * Hq + h;
      attention_tile(qp + row * D, Hq * D, ks.data(), vs.data(), D, m, kend, kend - m + 1, D, scale, op + row * D, nullptr,
                     strip.data());
    }
  });
  if (dt != DType::F32) cast(o32, out);
}

void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_cache, Tensor& v_cache) {
  const int64_t N = k.dim(0);
  const size_t row = static_cast<size_t>(k.dim(1) * k.dim(2)) * dtype_size(k.dtype());
  const int32_t* sl = slots.data<int32_t>();
  auto *kc = static_cast<char*>(k_cache.raw()), *vc = static_cast<char*>(v_cache.raw());
  const auto *kn = static_cast<const char*>(k.raw()), *vn = static_cast<const char*>(v.raw());
  for (int64_t i = 0; i < N; ++i) {
    std::memcpy(kc + static_cast<size_t>(sl[i]) * row, kn + static_cast<size_t>(i) * row, row);
    std::memcpy(vc + static_cast<size_t>(sl[i]) * row, vn + static_cast<size_t>(i) * row, row);
  }
}

}  // namespace dt::kernels::cpu
