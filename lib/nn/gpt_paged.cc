// GPT inference over a paged KV cache: the cached forward (gpt_cached.cc) for a batch whose
// sequences are at different stages (some prefilling a chunk, others decoding one token),
// packed into one row of tokens so that every linear layer runs once over all of them.
// Only attention needs to know where each sequence's keys are: it writes the chunk's new
// keys and values into their slots, then reads each sequence's block table directly.
#include <algorithm>

#include "core/device_scope.h"
#include "core/error.h"
#include "core/tensor_copy.h"
#include "kernels/ops.h"
#include "nn/gpt.h"
#include "nn/paged_kv.h"
#include "nn/rope.h"

namespace dt::nn {

PagedKv PagedKv::create(const GPTConfig& raw, int64_t num_blocks, int64_t block_size, int64_t kv_heads,
                        const std::vector<BlockRange>& layers) {
  validate(raw);
  const GPTConfig c = raw.resolved();
  DT_CHECK(num_blocks >= 1, "kv cache: num_blocks = " + std::to_string(num_blocks) + "; accepted: >= 1");
  DT_CHECK(block_size >= 1 && block_size <= 4096,
           "kv cache: block_size = " + std::to_string(block_size) + "; accepted: [1, 4096]");
  PagedKv kv;
  kv.num_blocks = num_blocks;
  kv.block_size = block_size;
  kv.context = c.context;
  kv.device = current_device();
  make_layer_caches(c, num_blocks, block_size, kv_heads, layers, kv.k, kv.v);
  return kv;
}

int64_t PagedKv::bytes_per_block(const GPTConfig& raw, int64_t block_size, int64_t kv_heads,
                                 const std::vector<BlockRange>& layers) {
  const GPTConfig c = raw.resolved();
  int64_t held = 0;
  for (int64_t l = 0; l < c.n_layer; ++l) held += holds_layer(layers, l) ? 1 : 0;
  return 2 * held * block_size * (kv_heads > 0 ? kv_heads : c.n_kv_head) * c.head_dim() *
         static_cast<int64_t>(dtype_size(c.dtype));
}

void PagedKv::begin_step(const PagedBatch& b) {
  const int64_t N = static_cast<int64_t>(b.ids.size()), S = static_cast<int64_t>(b.seqs.size());
  DT_CHECK(S >= 1, "paged batch: no sequences");
  Step& st = step;
  st = Step();
  int64_t max_blocks = 1, total = 0;
  for (int64_t i = 0; i < S; ++i) {
    const PagedBatch::Seq& q = b.seqs[static_cast<size_t>(i)];
    const std::string w = "paged batch: sequence " + std::to_string(i);
    DT_CHECK(q.count >= 1 && q.start >= 0 && q.start + q.count <= context,
             w + ": positions [" + std::to_string(q.start) + ", " + std::to_string(q.start + q.count) +
                 "); accepted: at least one, within the context of " + std::to_string(context));
    const int64_t need = (q.start + q.count + block_size - 1) / block_size;
    DT_CHECK(static_cast<int64_t>(q.blocks.size()) >= need,
             w + ": its table has " + std::to_string(q.blocks.size()) + " blocks, its positions need " +
                 std::to_string(need));
    for (int64_t j = 0; j < need; ++j)
      DT_CHECK(q.blocks[j] >= 0 && q.blocks[j] < num_blocks,
               w + ": block " + std::to_string(q.blocks[j]) + "; accepted: [0, " + std::to_string(num_blocks) + ")");
    max_blocks = std::max(max_blocks, need);
    total += q.count;
  }
  DT_CHECK(total == N, "paged batch: " + std::to_string(N) + " ids for chunks of " + std::to_string(total) + " tokens");
  st.tokens = N;
  st.host_ids = Tensor::uninit({1, N}, DType::I32);
  st.host_pos = Tensor::uninit({1, N}, DType::I32);
  Tensor seqs = Tensor::zeros({S, 3}, DType::I32), tables = Tensor::zeros({S, max_blocks}, DType::I32),
         slots = Tensor::uninit({N}, DType::I32);
  std::copy(b.ids.begin(), b.ids.end(), st.host_ids.data<int32_t>());
  int32_t *pos = st.host_pos.data<int32_t>(), *sq = seqs.data<int32_t>(), *tb = tables.data<int32_t>(),
          *sl = slots.data<int32_t>();
  int64_t row = 0;
  for (int64_t i = 0; i < S; ++i) {
    const PagedBatch::Seq& q = b.seqs[static_cast<size_t>(i)];
    st.first.push_back(row);
    st.start.push_back(q.start);
    st.count.push_back(q.count);
    sq[3 * i] = static_cast<int32_t>(row);
    sq[3 * i + 1] = static_cast<int32_t>(q.count);
    sq[3 * i + 2] = static_cast<int32_t>(q.start + q.count);
    const int64_t need = (q.start + q.count + block_size - 1) / block_size;
    std::copy(q.blocks.begin(), q.blocks.begin() + need, tb + i * max_blocks);
    for (int64_t t = 0; t < q.count; ++t, ++row) {
      const int64_t p = q.start + t;
      pos[row] = static_cast<int32_t>(p);
      sl[row] = static_cast<int32_t>(q.blocks[static_cast<size_t>(p / block_size)] * block_size + p % block_size);
    }
    if (q.logits) st.logit_rows.push_back(row - 1);
  }
  st.seqs = to_device(seqs, device);
  st.tables = to_device(tables, device);
  st.slots = to_device(slots, device);
}

namespace {

// Attention of the packed tokens x [1, N, C] of layer l; returns y [N, C].
const Tensor& attention_paged(CausalSelfAttention& at, const Tensor& x, PagedKv& kv, int l) {
  const int64_t N = x.dim(1), D = at.head_dim, Hq = at.hq, Hkv = at.hkv;
  InferenceScratch& s = kv.s;
  const PagedKv::Step& st = kv.step;
  project_qkv(at, x, s.q, s.kn, s.vn);
  Tensor q = s.q.reshape({N, Hq, D}), k = s.kn.reshape({N, Hkv, D}), v = s.vn.reshape({N, Hkv, D});
  if (at.cfg.rope)  // each sequence's chunk at its own offset
    for (size_t i = 0; i < st.first.size(); ++i) {
      const int64_t a = st.first[i], n = st.count[i];
      Tensor qi = q.slice0(a, a + n).reshape({1, n, Hq, D}), ki = k.slice0(a, a + n).reshape({1, n, Hkv, D});
      rope_forward(qi, at.cfg.rope_spec, st.start[i]);
      rope_forward(ki, at.cfg.rope_spec, st.start[i]);
    }
  kernels::kv_cache_write(k, v, st.slots, kv.k[static_cast<size_t>(l)], kv.v[static_cast<size_t>(l)]);
  ensure(s.out, {N, Hq, D}, x.dtype());
  kernels::paged_attention_forward(q, kv.k[static_cast<size_t>(l)], kv.v[static_cast<size_t>(l)], st.seqs, st.tables,
                                   /*scale=*/0.0f, s.out);
  at.proj.forward(s.out.reshape({N, Hq * D}), s.y);
  return s.y;
}

}  // namespace

void GPT::forward_paged(const PagedBatch& batch, PagedKv& kv, Tensor& logits) {
  need_whole("forward_paged");
  kv.begin_step(batch);
  paged_embed(batch, kv, kv.s.x);
  paged_blocks(0, cfg_.n_layer, kv.s.x, kv);
  paged_head(kv.s.x, kv, logits);
}

void GPT::paged_embed(const PagedBatch& batch, PagedKv& kv, Tensor& x) {
  ScopedDevice on(device_);
  PauseSequenceParallel no_sp(tp_);
  DT_CHECK(has_embed_, "paged_embed: this pipeline stage holds no embedding");
  DT_CHECK(kv.step.tokens == static_cast<int64_t>(batch.ids.size()),
           "paged_embed: call kv.begin_step(batch) first");
  for (int32_t t : batch.ids)
    DT_CHECK(t >= 0 && t < cfg_.vocab_size, "ids: token id " + std::to_string(t) + " is outside [0, vocab_size = " +
                                                std::to_string(cfg_.vocab_size) + ")");
  embed_at(kv.step.host_ids, kv.step.host_pos, kv.s.pos_ids, kv.s.pos, x);
}

void GPT::paged_blocks(int begin, int end, Tensor& x, PagedKv& kv) {
  ScopedDevice on(device_);
  PauseSequenceParallel no_sp(tp_);
  DT_CHECK(x.ndim() == 3 && x.dim(0) == 1 && x.dim(1) == kv.step.tokens && x.dim(2) == cfg_.d_model &&
               x.dtype() == cfg_.dtype,
           "paged_blocks: x must be [1, N, d_model] in the model's dtype for the step begun, got " +
               shape_str(x.shape()));
  for (int l = begin; l < end; ++l) {
    const Tensor& k = kv.k[static_cast<size_t>(l)];
    DT_CHECK(k.defined() && k.dim(2) == local_kv_heads() && k.dtype() == cfg_.dtype && k.device() == device_,
             "kv cache: does not hold layer " + std::to_string(l) + " as this rank's attention needs it; accepted: "
             "PagedKv::create with this model's config, local_kv_heads() and its stage's chunks, on its device");
    block_inference(l, x, kv.s, [&](CausalSelfAttention& at, const Tensor& h) -> const Tensor& {
      return attention_paged(at, h, kv, l);
    });
  }
}

void GPT::paged_head(const Tensor& x, PagedKv& kv, Tensor& logits) {
  ScopedDevice on(device_);
  PauseSequenceParallel no_sp(tp_);
  DT_CHECK(has_head_, "paged_head: this pipeline stage holds no head");
  const std::vector<int64_t>& rows = kv.step.logit_rows;
  const int64_t R = static_cast<int64_t>(rows.size()), C = cfg_.d_model;
  if (R == 0) {
    logits = Tensor();
    return;
  }
  Tensor& h = ensure(kv.s.h, {1, R, C}, x.dtype());  // only the rows whose next token is wanted
  const size_t bytes = static_cast<size_t>(C) * dtype_size(x.dtype());
  for (int64_t i = 0; i < R; ++i)
    copy_bytes(device_, static_cast<char*>(h.raw()) + static_cast<size_t>(i) * bytes,
               static_cast<const char*>(x.raw()) + static_cast<size_t>(rows[i]) * bytes, bytes);
  head_into(h, kv.s.ln, kv.s.logits_part, kv.s.logits_parts, logits);
}

}  // namespace dt::nn
