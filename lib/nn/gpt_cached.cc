// GPT inference over a KV cache: the same modules and ops as training's forward, except that
// attention reads each row's keys and values from the cache, so a decode step costs one
// position instead of the whole sequence.
#include <cstring>
#include <set>

#include "core/device_scope.h"
#include "core/error.h"
#include "core/tensor_copy.h"
#include "kernels/ops.h"
#include "nn/gpt.h"
#include "nn/kv_cache.h"
#include "nn/rope.h"

namespace dt::nn {

KvCache KvCache::create(const GPTConfig& raw, int64_t batch, int64_t max_len, int64_t kv_heads,
                        const std::vector<BlockRange>& layers) {
  validate(raw);
  GPTConfig c = raw.resolved();
  DT_CHECK(batch >= 1, "kv cache: batch = " + std::to_string(batch) + "; accepted: >= 1");
  DT_CHECK(max_len >= 1 && max_len <= c.context, "kv cache: max_len = " + std::to_string(max_len) +
                                                     "; accepted: [1, context = " + std::to_string(c.context) + "]");
  KvCache kv;
  kv.batch = batch;
  kv.max_len = max_len;
  kv.len.assign(batch, 0);
  make_layer_caches(c, batch, max_len, kv_heads, layers, kv.k, kv.v);
  return kv;
}

void make_layer_caches(const GPTConfig& c, int64_t d0, int64_t d1, int64_t kv_heads,
                       const std::vector<BlockRange>& layers, std::vector<Tensor>& k, std::vector<Tensor>& v) {
  k.assign(static_cast<size_t>(c.n_layer), Tensor());
  v.assign(static_cast<size_t>(c.n_layer), Tensor());
  const Shape s = {d0, d1, kv_heads > 0 ? kv_heads : c.n_kv_head, c.head_dim()};
  for (int64_t l = 0; l < c.n_layer; ++l) {
    if (!holds_layer(layers, l)) continue;  // another pipeline stage's layer
    // The model's dtype, on the current device (the model's, under the engine).
    k[static_cast<size_t>(l)] = Tensor::zeros(s, c.dtype, current_device(), MemTag::KvCache);
    v[static_cast<size_t>(l)] = Tensor::zeros(s, c.dtype, current_device(), MemTag::KvCache);
  }
}

void project_qkv(CausalSelfAttention& at, const Tensor& x, Tensor& q, Tensor& k, Tensor& v) {
  const int64_t B = x.dim(0), Tq = x.dim(1), D = at.head_dim, Hq = at.hq, Hkv = at.hkv;
  Tensor x2 = flat2d(x);
  // The fused qkv weight's row ranges, as in attention.cc: q, then k, then v.
  const int64_t b[3] = {0, Hq * D, (Hq + Hkv) * D}, e[3] = {Hq * D, (Hq + Hkv) * D, (Hq + 2 * Hkv) * D};
  Tensor* dst[3] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    const int64_t heads = i == 0 ? Hq : Hkv;
    ensure(*dst[i], {B, Tq, heads, D}, x.dtype());
    Tensor y2 = dst[i]->reshape({B * Tq, heads * D});
    Tensor bias = at.qkv.bias.value.defined() ? at.qkv.bias.value.slice0(b[i], e[i]) : Tensor();
    linear_forward(x2, at.qkv.weight.value.slice0(b[i], e[i]), bias, y2);
  }
}

namespace {

// Row r of a [batch, max_len, H, D] cache, positions [0, n): contiguous, so a plain view.
Tensor cache_prefix(const Tensor& cache, int64_t r, int64_t n) {
  const int64_t L = cache.dim(1), H = cache.dim(2), D = cache.dim(3);
  return cache.slice0(r, r + 1).reshape({L, H, D}).slice0(0, n).reshape({1, n, H, D});
}

// Attention of x [B, Tq, C] over the cache of layer l; returns y [B * Tq, C].
const Tensor& attention_cached(CausalSelfAttention& at, const Tensor& x, KvCache& c, int l,
                               const std::vector<int64_t>& rows) {
  const int64_t B = x.dim(0), Tq = x.dim(1), D = at.head_dim, Hq = at.hq, Hkv = at.hkv;  // this rank's heads
  InferenceScratch& s = c.s;
  project_qkv(at, x, s.q, s.kn, s.vn);
  ensure(s.out, {B, Tq, Hq, D}, x.dtype());
  ensure(s.lse, {1, Hq, Tq});
  const size_t elem = dtype_size(x.dtype());
  const size_t row_bytes = static_cast<size_t>(Tq * Hkv * D) * elem;
  const size_t pos_bytes = static_cast<size_t>(Hkv * D) * elem;  // one position of one row
  for (int64_t i = 0; i < B; ++i) {
    const int64_t r = rows[i], p0 = c.len[r];
    Tensor qi = s.q.slice0(i, i + 1), ki = s.kn.slice0(i, i + 1);
    if (at.cfg.rope) {  // each row at its own offset: that is what makes ragged batches work
      rope_forward(qi, at.cfg.rope_spec, p0);
      rope_forward(ki, at.cfg.rope_spec, p0);
    }
    // Append this step's keys and values to the row, then attend over all of it.
    auto* kdst = static_cast<char*>(cache_prefix(c.k[l], r, p0 + Tq).raw()) + static_cast<size_t>(p0) * pos_bytes;
    auto* vdst = static_cast<char*>(cache_prefix(c.v[l], r, p0 + Tq).raw()) + static_cast<size_t>(p0) * pos_bytes;
    copy_bytes(x.device(), kdst, ki.raw(), row_bytes);
    copy_bytes(x.device(), vdst, s.vn.slice0(i, i + 1).raw(), row_bytes);
    Tensor oi = s.out.slice0(i, i + 1);
    kernels::attention_forward(qi, cache_prefix(c.k[l], r, p0 + Tq), cache_prefix(c.v[l], r, p0 + Tq),
                               /*scale=*/0.0f, oi, s.lse);
  }
  at.proj.forward(s.out.reshape({B * Tq, Hq * D}), s.y);
  return s.y;
}

}  // namespace

int64_t GPT::local_kv_heads() const { return blocks_.empty() ? cfg_.n_kv_head : blocks_[0]->attn.hkv; }


void GPT::check_cached(const KvCache& c, const std::vector<int64_t>& rows, int64_t B, int64_t Tq) const {
  DT_CHECK(static_cast<int64_t>(c.k.size()) == cfg_.n_layer, "kv cache: built for another model (layers differ)");
  for (const BlockRange& r : chunks_)
    for (int l = r.begin; l < r.end; ++l) {
      const Tensor& k = c.k[static_cast<size_t>(l)];
      DT_CHECK(k.defined(), "kv cache: holds no layer " + std::to_string(l) + ", which this model runs; accepted: "
                            "KvCache::create with this stage's chunks");
      DT_CHECK(k.dtype() == cfg_.dtype, std::string("kv cache: holds ") + dtype_name(k.dtype()) +
                                            ", the model computes in " + dtype_name(cfg_.dtype) +
                                            "; accepted: a cache made from this model's config");
      DT_CHECK(k.dim(2) == local_kv_heads(),
               "kv cache: " + std::to_string(k.dim(2)) + " KV heads per layer, this rank's attention holds " +
                   std::to_string(local_kv_heads()) + "; accepted: KvCache::create(..., local_kv_heads())");
      DT_CHECK(k.device() == device_, "kv cache: on " + k.device().str() + ", the model on " + device_.str() +
                                          "; accepted: a cache made on the model's device");
    }
  DT_CHECK(static_cast<int64_t>(rows.size()) == B, "rows: " + std::to_string(rows.size()) +
                                                       " entries for B = " + std::to_string(B) + " rows of ids");
  std::set<int64_t> seen;
  for (int64_t r : rows) {
    DT_CHECK(r >= 0 && r < c.batch && seen.insert(r).second,
             "rows: " + std::to_string(r) + " is repeated or outside [0, cache batch = " + std::to_string(c.batch) + ")");
    DT_CHECK(c.len[r] + Tq <= c.max_len, "ids: row " + std::to_string(r) + " would hold " +
                                             std::to_string(c.len[r] + Tq) + " positions; the cache's max_len is " +
                                             std::to_string(c.max_len));
  }
}

void GPT::forward_cached(const Tensor& ids, KvCache& c, const std::vector<int64_t>& rows, Tensor& logits,
                         bool last_only) {
  need_whole("forward_cached");
  cached_embed(ids, c, rows, c.s.x);  // checks ids, rows and the cache
  cached_blocks(0, cfg_.n_layer, c.s.x, c, rows);
  cached_head(c.s.x, c, logits, last_only);
  advance_cached(c, rows, ids.dim(1));
}

void GPT::cached_embed(const Tensor& ids, KvCache& c, const std::vector<int64_t>& rows, Tensor& x) {
  ScopedDevice on(device_);
  PauseSequenceParallel no_sp(tp_);
  DT_CHECK(has_embed_, "cached_embed: this pipeline stage holds no embedding");
  DT_CHECK(ids.dtype() == DType::I32 && ids.ndim() == 2,
           "ids: expected i32 [B, T], got " + std::string(dtype_name(ids.dtype())) + " " + shape_str(ids.shape()));
  const int64_t B = ids.dim(0), Tq = ids.dim(1);
  check_cached(c, rows, B, Tq);
  const Tensor host_ids = to_device(ids, Device::cpu());  // checked on the host
  const int32_t* p = host_ids.data<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    DT_CHECK(p[i] >= 0 && p[i] < cfg_.vocab_size, "ids: token id " + std::to_string(p[i]) +
                                                      " is outside [0, vocab_size = " + std::to_string(cfg_.vocab_size) + ")");
  Tensor host_pos = Tensor::uninit({B, Tq}, DType::I32);
  int32_t* pos = host_pos.data<int32_t>();
  for (int64_t i = 0; i < B; ++i)
    for (int64_t t = 0; t < Tq; ++t) pos[i * Tq + t] = static_cast<int32_t>(c.len[rows[i]] + t);
  embed_at(host_ids, host_pos, c.s.pos_ids, c.s.pos, x);
}

void GPT::embed_at(const Tensor& host_ids, const Tensor& host_pos, Tensor& pos_ids, Tensor& pos, Tensor& x) {
  const int64_t B = host_ids.dim(0), Tq = host_ids.dim(1);
  ensure(x, {B, Tq, cfg_.d_model}, cfg_.dtype);
  if (tp_.size() == 1) {
    wte_->forward(to_device(host_ids, device_), x);
  } else {  // vocab parallel: each rank's rows of the table, summed
    kernels::embedding_forward(slice_ids(host_ids, vocab_, device_), wte_->weight.value, x);
    all_reduce_sum(tp_, x);
  }
  if (wpe_) {
    copy_tensor(host_pos, ensure(pos_ids, {B, Tq}, DType::I32));
    wpe_->forward(pos_ids, pos);
    kernels::add(x, pos, x);
  }
}

void GPT::cached_blocks(int begin, int end, Tensor& x, KvCache& c, const std::vector<int64_t>& rows) {
  ScopedDevice on(device_);
  PauseSequenceParallel no_sp(tp_);
  DT_CHECK(x.ndim() == 3 && x.dim(2) == cfg_.d_model && x.dtype() == cfg_.dtype,
           "cached_blocks: x must be [B, Tq, d_model] in the model's dtype, got " + shape_str(x.shape()));
  check_cached(c, rows, x.dim(0), x.dim(1));
  for (int l = begin; l < end; ++l)
    block_inference(l, x, c.s, [&](CausalSelfAttention& at, const Tensor& h) -> const Tensor& {
      return attention_cached(at, h, c, l, rows);
    });
}

void GPT::block_inference(int l, Tensor& x, InferenceScratch& s,
                          const std::function<const Tensor&(CausalSelfAttention&, const Tensor&)>& attend) {
  TransformerBlock& blk = block(l);  // TransformerBlock::forward, with the cache's attention
  const Tensor& h1 = blk.ln1.forward(x, s.ln);
  const Tensor& att = attend(blk.attn, h1);
  kernels::add(x, att.reshape(x.shape()), x);
  const Tensor& h2 = blk.ln2.forward(x, s.ln);
  const Tensor& m = blk.ffn.forward(h2, s.ffn);
  kernels::add(x, m.reshape(x.shape()), x);
}

void GPT::cached_head(const Tensor& x, KvCache& c, Tensor& logits, bool last_only) {
  ScopedDevice on(device_);
  PauseSequenceParallel no_sp(tp_);
  DT_CHECK(has_head_, "cached_head: this pipeline stage holds no head");
  const int64_t B = x.dim(0), Tq = x.dim(1), C = x.dim(2);
  if (!last_only || Tq == 1) return head_into(x, c.s.ln, c.s.logits_part, c.s.logits_parts, logits);
  // Each row's last position, copied out (they are Tq positions apart): the head runs on B rows.
  Tensor& last = ensure(c.s.last, {B, 1, C}, x.dtype());
  const Tensor x2 = x.reshape({B * Tq, C});
  for (int64_t b = 0; b < B; ++b) {
    Tensor dst = last.reshape({B, C}).slice0(b, b + 1);
    copy_tensor(x2.slice0(b * Tq + Tq - 1, b * Tq + Tq), dst);
  }
  head_into(last, c.s.ln, c.s.logits_part, c.s.logits_parts, logits);
}

void GPT::head_into(const Tensor& x, Norm::Acts& ln, Tensor& part, Tensor& parts, Tensor& logits) {
  const int64_t B = x.dim(0), Tq = x.dim(1);
  const Tensor& h = lnf_->forward(x, ln);
  ensure(logits, {B, Tq, cfg_.vocab_size}, h.dtype());
  Tensor l2 = flat2d(logits);
  const Tensor& w = lm_head_ ? lm_head_->weight.value : wte_->weight.value;
  if (tp_.size() == 1) {
    linear_forward(flat2d(h), w, Tensor(), l2);
  } else {  // this rank's vocabulary columns, all-gathered into the whole logits
    const int64_t n = B * Tq * vocab_.rows, N = tp_.size();
    Tensor& mine = ensure(part, {B * Tq, vocab_.rows}, h.dtype());
    linear_forward(flat2d(h), w, Tensor(), mine);
    ensure(parts, {N * n}, h.dtype());
    tp_.comm->all_gather(mine.raw(), parts.raw(), n, h.dtype());
    for (int r = 0; r < N; ++r)
      place_shard(parts.slice0(r * n, (r + 1) * n).reshape({B * Tq, vocab_.rows}), ShardSpec{1, "tp", {}, true}, r,
                  static_cast<int>(N), l2);
  }
}

void GPT::advance_cached(KvCache& c, const std::vector<int64_t>& rows, int64_t Tq) const {
  for (int64_t r : rows) c.len[static_cast<size_t>(r)] += Tq;
}

}  // namespace dt::nn
