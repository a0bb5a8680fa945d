#include "nn/gpt.h"

#include <utility>

#include "core/device_scope.h"
#include "core/error.h"
#include "core/tensor_copy.h"
#include "kernels/ops.h"

namespace dt::nn {

static GPTConfig checked(const GPTConfig& c) {
  validate(c);
  return c.resolved();
}

GPT::GPT(const GPTConfig& cfg, TpGroup tp, std::vector<BlockRange> chunks, EpGroup ep, CpGroup cp)
    : cfg_(checked(cfg)), tp_(std::move(tp)), cp_(cp), device_(current_device()) {
  const GPTConfig& c = cfg_;
  const int L = static_cast<int>(c.n_layer);
  if (chunks.empty()) chunks = {{0, L}};
  for (size_t k = 0; k < chunks.size(); ++k) {
    const BlockRange& r = chunks[k];
    DT_CHECK(0 <= r.begin && r.begin < r.end && r.end <= L && (k == 0 || chunks[k - 1].end <= r.begin),
             "GPT chunks: range " + std::to_string(k) + " = [" + std::to_string(r.begin) + ", " + std::to_string(r.end) +
                 ") is empty, overlaps the one before or leaves [0, n_layer = " + std::to_string(L) +
                 "); accepted: disjoint non-empty block ranges in order");
  }
  chunks_ = std::move(chunks);
  has_embed_ = chunks_.front().begin == 0;
  has_head_ = chunks_.back().end == L;
  if (tp_.sp() && !tp_.buffers) tp_.buffers = std::make_shared<SpBuffers>();  // shared by every layer
  vocab_ = nn::vocab_slice(c.vocab_size, tp_);
  if (has_embed_ || (has_head_ && c.tied_embeddings)) {
    wte_ = std::make_unique<Embedding>("wte", c.vocab_size, c.d_model, c.seed, 0.02f, c.dtype);
    shard_parameter(wte_->weight, vocab_spec(), tp_);  // this rank's vocabulary rows (tp > 1)
  }
  if (has_embed_ && c.pos == PosKind::Learned)
    wpe_ = std::make_unique<Embedding>("wpe", c.context, c.d_model, c.seed, 0.02f, c.dtype);
  local_of_.assign(static_cast<size_t>(L), -1);
  for (const BlockRange& r : chunks_)
    for (int i = r.begin; i < r.end; ++i) {
      local_of_[static_cast<size_t>(i)] = static_cast<int>(blocks_.size());
      blocks_.push_back(std::make_unique<TransformerBlock>("blocks." + std::to_string(i), c, tp_, ep, cp_));
    }
  if (has_head_) {
    lnf_ = std::make_unique<Norm>("ln_f", c.d_model, c.norm, c.bias, c.norm_eps, c.dtype);
    for (Parameter* p : {&lnf_->weight, &lnf_->bias}) p->grad_partial_over_tp = tp_.sp();  // sees its rows only
    if (!c.tied_embeddings) {
      lm_head_ = std::make_unique<Linear>("lm_head", c.d_model, c.vocab_size, false, c.seed, 0.02f, c.dtype);
      shard_parameter(lm_head_->weight, vocab_spec(), tp_);
    }
  }
}

TransformerBlock& GPT::block(int i) {
  DT_CHECK(0 <= i && i < cfg_.n_layer && local_of_[static_cast<size_t>(i)] >= 0,
           "block " + std::to_string(i) + " is not held by this model (a pipeline stage holds some blocks only)");
  return *blocks_[static_cast<size_t>(local_of_[static_cast<size_t>(i)])];
}

void GPT::need_whole(const char* what) const {
  DT_CHECK(whole(), std::string(what) + " needs the whole model; this one is a pipeline stage holding blocks of " +
                        std::to_string(cfg_.n_layer) + " (run it by stage: embed, forward_blocks, head)");
}

Shape GPT::stream_shape(int64_t B, int64_t T) const {
  if (tp_.sp()) return {B * T / tp_.size(), cfg_.d_model};
  return {B, T, cfg_.d_model};
}

void GPT::collect(ParamList& list) {
  if (has_embed_) wte_->collect(list);  // not the last stage's tied copy (tied_copy())
  if (wpe_) wpe_->collect(list);
  for (auto& b : blocks_) b->collect(list);
  if (lnf_) lnf_->collect(list);
  if (lm_head_) lm_head_->collect(list);
}

void GPT::embed(const Tensor& ids, GPTActs& a) {
  ScopedDevice on(device_);
  DT_CHECK(has_embed_, "embed: this pipeline stage holds no embedding (it starts at a later block)");
  DT_CHECK(ids.dtype() == DType::I32 && ids.ndim() == 2,
           "ids: expected i32 [B, T], got " + std::string(dtype_name(ids.dtype())) + " " + shape_str(ids.shape()));
  const int64_t B = ids.dim(0), T = ids.dim(1);
  DT_CHECK(T * cp_.size() <= cfg_.context, "ids: sequence length T = " + std::to_string(T * cp_.size()) +
                                               " exceeds context = " + std::to_string(cfg_.context));
  DT_CHECK(cp_.size() == 1 || T % 2 == 0,
           "ids: " + std::to_string(T) + " local tokens per sequence under cp = " + std::to_string(cp_.size()) +
               "; required: two equal chunks");
  const Tensor host_ids = to_device(ids, Device::cpu());  // checked on the host: one id per token
  const int32_t* p = host_ids.data<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    DT_CHECK(p[i] >= 0 && p[i] < cfg_.vocab_size, "ids: token id " + std::to_string(p[i]) + " at index " +
                                                      std::to_string(i) + " is outside [0, vocab_size = " +
                                                      std::to_string(cfg_.vocab_size) + ")");
  begin_acts(B, T, a);
  a.ids = to_device(ids, device_, MemTag::Activation);
  // This rank's token rows (all of them, [B, T], unless sequence parallel).
  auto mine = [&](const Tensor& t) {
    if (!tp_.sp()) return t;
    const Tensor rows = local_tokens(tp_, t.reshape({B * T, 1}));
    return rows.reshape({rows.numel()});
  };
  if (tp_.size() == 1) {
    wte_->forward(a.ids, a.resid[0]);
  } else {  // vocab parallel: each rank's rows of the table, summed over tp
    a.ids_slice = slice_ids(host_ids, vocab_, device_);
    Tensor& part = partial_buffer(tp_, {B, T, cfg_.d_model}, cfg_.dtype, a.resid[0]);
    Tensor part3 = part.reshape({B, T, cfg_.d_model});
    kernels::embedding_forward(a.ids_slice, wte_->weight.value, part3);
    sum_partial(tp_, part, a.resid[0]);
  }
  if (wpe_) {
    Tensor host_pos = Tensor::uninit({B, T}, DType::I32);
    int32_t* pos = host_pos.data<int32_t>();
    for (int64_t i = 0; i < B * T; ++i) pos[i] = static_cast<int32_t>(cp_.position(i % T, T));
    copy_tensor(host_pos, ensure(a.pos_ids, {B, T}, DType::I32));
    wpe_->forward(mine(a.pos_ids), a.pos);
    kernels::add(a.resid[0], a.pos, a.resid[0]);
  }
}

void GPT::begin_acts(int64_t B, int64_t T, GPTActs& a) const {
  a.B = B;
  a.T = T;
  a.resid.resize(static_cast<size_t>(cfg_.n_layer) + 1);
  a.blocks.resize(static_cast<size_t>(cfg_.n_layer));
  a.moe = {};
}

void GPT::set_stream(int i, const Tensor& x, GPTActs& a) {
  ScopedDevice on(device_);
  DT_CHECK(0 <= i && i <= cfg_.n_layer, "set_stream: block " + std::to_string(i) + " outside [0, n_layer = " +
                                             std::to_string(cfg_.n_layer) + "]");
  DT_CHECK(x.dtype() == cfg_.dtype && x.ndim() == 3 && x.dim(2) == cfg_.d_model && x.dim(1) <= cfg_.context,
           std::string("set_stream: x must be ") + dtype_name(cfg_.dtype) + " (the model's dtype) [B, T <= context, " +
               "d_model = " + std::to_string(cfg_.d_model) + "], got " + dtype_name(x.dtype()) + " " +
               shape_str(x.shape()));
  begin_acts(x.dim(0), x.dim(1), a);
  a.resid[i] = x;
}

void GPT::forward_blocks(int begin, int end, GPTActs& a) {
  ScopedDevice on(device_);
  DT_CHECK(0 <= begin && begin <= end && end <= cfg_.n_layer,
           "block range [" + std::to_string(begin) + ", " + std::to_string(end) + ") outside [0, " +
               std::to_string(cfg_.n_layer) + "]");
  for (int i = begin; i < end; ++i) {
    Tensor& y = ensure(a.resid[i + 1], a.resid[i].shape(), a.resid[i].dtype());
    TransformerBlock::Acts& acts = cfg_.checkpoint ? scratch_ : a.blocks[i];
    block(i).forward(a.resid[i], {a.B, a.T}, acts, y);
    if (cfg_.moe()) {
      const std::vector<int64_t>& t = acts.ffn.moe.stats.tokens;
      a.moe.add(acts.ffn.moe.stats);
      a.moe.block_tokens.resize(static_cast<size_t>(cfg_.n_layer * cfg_.n_experts), 0);
      for (size_t e = 0; e < t.size(); ++e) a.moe.block_tokens[static_cast<size_t>(i * cfg_.n_experts) + e] += t[e];
    }
  }
}

const Tensor& GPT::head(GPTActs& a) {
  ScopedDevice on(device_);
  DT_CHECK(has_head_, "head: this pipeline stage holds no head (it ends before the last block)");
  const Tensor& h = lnf_->forward(a.resid.back(), a.lnf);
  // SP: every rank's rows, kept in the micro-batch's acts (one [B T, C] per model).
  a.hw = gather_tokens(tp_, h, {a.B, a.T, cfg_.d_model}, &a.hw);
  ensure(a.logits, {a.B, a.T, vocab_.rows}, h.dtype());
  Tensor l2 = flat2d(a.logits);
  if (lm_head_)
    linear_forward(flat2d(a.hw), lm_head_->weight.value, Tensor(), l2);
  else  // tied: logits = h wte^T, the token table read as an [out = vocab, in = C] weight
    linear_forward(flat2d(a.hw), wte_->weight.value, Tensor(), l2);
  return a.logits;
}

const Tensor& GPT::forward(const Tensor& ids, GPTActs& a) {
  ScopedDevice on(device_);
  need_whole("forward");
  embed(ids, a);
  forward_blocks(0, num_blocks(), a);
  return head(a);
}

double GPT::forward_loss(const Tensor& ids, const Tensor& targets, GPTActs& a, int32_t ignore_index) {
  ScopedDevice on(device_);
  DT_CHECK(targets.dtype() == DType::I32 && targets.shape() == ids.shape(),
           "targets: expected i32 of the shape of ids " + shape_str(ids.shape()) + ", got " +
               shape_str(targets.shape()));
  forward(ids, a);
  return loss(targets, ignore_index, a);
}

double GPT::loss(const Tensor& targets, int32_t ignore_index, GPTActs& a) {
  ScopedDevice on(device_);
  a.targets = targets;
  a.ignore_index = ignore_index;
  if (tp_.size() > 1) return vocab_parallel_cross_entropy(tp_, vocab_, a.logits, targets, ignore_index, a.ce);
  return cross_entropy_loss(a.logits, targets, ignore_index, a.ce);
}

void GPT::loss_backward(GPTActs& a, float grad_scale) {
  ScopedDevice on(device_);
  a.grad_scale = grad_scale;
  if (tp_.size() > 1)
    vocab_parallel_cross_entropy_backward(vocab_, a.logits, a.targets, a.ignore_index, a.ce, a.dlogits, grad_scale);
  else
    cross_entropy_loss_backward(a.logits, a.targets, a.ignore_index, a.ce, a.dlogits, grad_scale);
}

void GPT::backward(GPTActs& a, float grad_scale) {
  ScopedDevice on(device_);
  loss_backward(a, grad_scale);
  backward_logits(a.dlogits, a);
}

void GPT::backward_logits(const Tensor& dlogits, GPTActs& a) {
  ScopedDevice on(device_);
  need_whole("backward");
  backward_head(dlogits, a);
  backward_blocks(0, num_blocks(), a);
  backward_embed(a);
}

void GPT::backward_head(const Tensor& dlogits, GPTActs& a) {
  ScopedDevice on(device_);
  DT_CHECK(has_head_, "backward_head: this pipeline stage holds no head");
  // Each rank's dh is its vocabulary columns' share (tp): summed over tp, under SP into
  // this rank's token rows.
  Tensor& part = partial_buffer(tp_, a.hw.shape(), a.hw.dtype(), a.dh);
  Tensor dh2 = flat2d(part), none;
  Parameter& w = lm_head_ ? lm_head_->weight : wte_->weight;
  linear_backward(flat2d(dlogits), flat2d(a.hw), w.value, dh2, false, w.grad, none);
  sum_partial(tp_, part, a.dh);
  const Tensor dh = a.dh.reshape(a.lnf.y.shape());
  lnf_->backward(dh, a.lnf, ensure(a.dresid, dh.shape(), dh.dtype()));
}

void GPT::backward_blocks(int begin, int end, GPTActs& a) {
  ScopedDevice on(device_);
  DT_CHECK(0 <= begin && begin <= end && end <= cfg_.n_layer,
           "block range [" + std::to_string(begin) + ", " + std::to_string(end) + ") outside [0, " +
               std::to_string(cfg_.n_layer) + "]");
  for (int i = end - 1; i >= begin; --i) {
    ensure(a.dtmp, a.dresid.shape(), a.dresid.dtype());
    if (cfg_.checkpoint) {
      Tensor& y = ensure(scratch_y_, a.resid[i].shape(), a.resid[i].dtype());
      block(i).forward(a.resid[i], {a.B, a.T}, scratch_, y);  // recompute
      block(i).backward(a.dresid, scratch_, a.dtmp, a.grad_scale * a.aux_share);
    } else {
      block(i).backward(a.dresid, a.blocks[i], a.dtmp, a.grad_scale * a.aux_share);
    }
    std::swap(a.dresid, a.dtmp);
  }
}

void GPT::backward_embed(GPTActs& a) {
  ScopedDevice on(device_);
  DT_CHECK(has_embed_, "backward_embed: this pipeline stage holds no embedding");
  // SP: the tables' gradients from every rank's rows (an all-gather of the stream's
  // gradient), so they are whole on every rank like the head's.
  const Tensor d = gather_tokens(tp_, a.dresid, {a.B, a.T, cfg_.d_model});
  wte_->backward(tp_.size() > 1 ? a.ids_slice : a.ids, d);  // tp: this rank's vocabulary rows
  if (wpe_) wpe_->backward(a.pos_ids, d);
}

}  // namespace dt::nn
