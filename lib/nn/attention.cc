#include "nn/attention.h"

#include "kernels/ops.h"
#include "nn/rope.h"

namespace dt::nn {

namespace {
// Query heads per tp rank: the count must divide by the tp size.
int64_t local_heads(const std::string& name, int64_t heads, const TpGroup& tp) {
  DT_CHECK(heads % tp.size() == 0, name + ": n_head = " + std::to_string(heads) + " does not split over tp = " +
                                       std::to_string(tp.size()) + "; accepted: a tp size that divides " +
                                       std::to_string(heads));
  return heads / tp.size();
}
// KV heads per tp rank: a share when they split (n_kv_head % tp == 0), else one, held by
// the tp / n_kv_head ranks whose query heads read it (tp % n_kv_head == 0).
int64_t kv_replicas(const std::string& name, int64_t kv, const TpGroup& tp) {
  const int64_t n = tp.size();
  DT_CHECK(kv % n == 0 || n % kv == 0, name + ": n_kv_head = " + std::to_string(kv) + " over tp = " +
                                           std::to_string(n) + ": neither divides the other; accepted: a tp size "
                                           "that divides " + std::to_string(kv) + " or is a multiple of it");
  return kv % n == 0 ? 1 : n / kv;
}
}  // namespace

CausalSelfAttention::CausalSelfAttention(const std::string& name, const AttentionConfig& c, uint64_t seed,
                                         float proj_std)
    : cfg(c),
      head_dim(c.d_model / c.n_head),
      hq(local_heads(name, c.n_head, c.tp)),
      kv_rep(kv_replicas(name, c.n_kv_head, c.tp)),
      hkv(c.n_kv_head * kv_rep / c.tp.size()),
      qkv(name + ".qkv", c.d_model, (c.n_head + 2 * c.n_kv_head) * head_dim, c.qkv_bias, seed, 0.02f, c.dtype, c.tp,
          {c.n_head * head_dim, c.n_kv_head * head_dim, c.n_kv_head * head_dim}, {1, kv_rep, kv_rep}),
      proj(name + ".proj", c.d_model, c.d_model, c.bias, seed, proj_std, c.dtype, c.tp) {}

void CausalSelfAttention::collect(ParamList& list) {
  qkv.collect(list);
  proj.collect(list);
}

namespace {
// The q, k, v row ranges of the fused weight (and bias).
struct Split {
  int64_t begin[3], end[3];
};
Split split_of(int64_t hq, int64_t hkv, int64_t d) {
  int64_t nq = hq * d, nk = hkv * d;
  return {{0, nq, nq + nk}, {nq, nq + nk, nq + 2 * nk}};
}
}  // namespace

const Tensor& CausalSelfAttention::forward(const Tensor& x, const Shape& bt, Acts& a) {
  const int64_t B = bt.at(0), T = bt.at(1), D = head_dim;
  a.x = x;
  const Tensor x2 = flat2d(gather_tokens(cfg.tp, x, {B, T, cfg.d_model}));
  Split s = split_of(hq, hkv, D);
  Tensor* dst[3] = {&a.q, &a.k, &a.v};
  for (int i = 0; i < 3; ++i) {
    int64_t heads = i == 0 ? hq : hkv;
    ensure(*dst[i], {B, T, heads, D}, x.dtype());
    Tensor y2 = dst[i]->reshape({B * T, heads * D});
    linear_forward(x2, qkv.weight.value.slice0(s.begin[i], s.end[i]), rows_of(qkv.bias.value, s.begin[i], s.end[i]),
                   y2);
  }
  if (cfg.rope) {
    const std::vector<int64_t> pos = cfg.cp.positions(T);
    rope_forward(a.q, cfg.rope_spec, pos);
    rope_forward(a.k, cfg.rope_spec, pos);
  }
  ensure(a.out, {B, T, hq, D}, x.dtype());
  ensure(a.lse, {B, hq, T});
  if (cfg.cp.size() > 1)
    ring_attention_forward(cfg.cp, a.q, a.k, a.v, a.out, a.lse);
  else
    kernels::attention_forward(a.q, a.k, a.v, /*scale=*/0.0f, a.out, a.lse);
  proj.forward(a.out.reshape({B * T, hq * D}), a.y);
  return a.y;
}

void CausalSelfAttention::backward(const Tensor& dy, Acts& a, Tensor& dx) {
  const int64_t B = a.out.dim(0), T = a.out.dim(1), D = head_dim;
  ensure(a.dout, a.out.shape(), a.out.dtype());
  Tensor dout2 = a.dout.reshape({B * T, hq * D});
  proj.backward(a.out.reshape({B * T, hq * D}), flat2d(dy), dout2);
  ensure(a.dq, a.q.shape(), a.q.dtype());
  ensure(a.dk, a.k.shape(), a.k.dtype());
  ensure(a.dv, a.v.shape(), a.v.dtype());
  if (cfg.cp.size() > 1)
    ring_attention_backward(cfg.cp, a.q, a.k, a.v, a.out, a.lse, a.dout, a.dq, a.dk, a.dv);
  else
    kernels::attention_backward(a.q, a.k, a.v, a.out, a.lse, a.dout, 0.0f, a.dq, a.dk, a.dv);
  if (cfg.rope) {  // back to the gradients of the un-rotated projections
    const std::vector<int64_t> pos = cfg.cp.positions(T);
    rope_backward(a.dq, cfg.rope_spec, pos);
    rope_backward(a.dk, cfg.rope_spec, pos);
  }
  // dx = dq Wq + dk Wk + dv Wv over the whole tokens; each rank's is its heads' share.
  // Under SP the input is gathered again (proj's backward has used the gathered buffer).
  const Tensor x2 = flat2d(gather_tokens(cfg.tp, a.x, {B, T, cfg.d_model}));
  Tensor& part = partial_buffer(cfg.tp, {B, T, cfg.d_model}, a.x.dtype(), dx);
  Tensor dx2 = flat2d(part);
  Split s = split_of(hq, hkv, D);
  if (kv_rep > 1) zero_kv_slots(a);
  const Tensor* src[3] = {&a.dq, &a.dk, &a.dv};
  for (int i = 0; i < 3; ++i) {
    Tensor dy2 = flat2d(src[i]->reshape({B * T, src[i]->dim(2) * D}));
    // A KV head held by several ranks gets each one's share (from its query heads): this
    // micro-batch's K and V weight gradients go to a zeroed buffer, summed over them below.
    const bool shared = i > 0 && kv_rep > 1;
    Tensor dw = shared ? kv_grad_rows(a, i - 1, false) : qkv.weight.grad.slice0(s.begin[i], s.end[i]);
    Tensor db = shared ? kv_grad_rows(a, i - 1, true) : rows_of(qkv.bias.grad, s.begin[i], s.end[i]);
    // The first overwrites, the others accumulate.
    linear_backward(dy2, x2, qkv.weight.value.slice0(s.begin[i], s.end[i]), dx2, i > 0, dw, db);
  }
  if (kv_rep > 1) sum_shared_kv_grads(a);
  sum_partial(cfg.tp, part, dx);
}

// The KV slots: [n_kv_head, 2 (k, v), rows of one head (+ bias)] in one zeroed buffer, this
// rank's head in its slot; an all-reduce over tp then sums each head over the ranks that
// hold it (the other slots are zero on them), n_kv_head x the bytes of one head's K and V
// gradients. Simpler than a communicator per KV head, and the heads are few.
int64_t CausalSelfAttention::kv_slot() const {
  const int64_t rows = hkv * head_dim;  // hkv = 1 here
  return 2 * (rows * cfg.d_model + (cfg.qkv_bias ? rows : 0));
}

void CausalSelfAttention::zero_kv_slots(Acts& a) {
  if (!a.kv_sum.defined() || a.kv_sum.numel() != cfg.n_kv_head * kv_slot())
    a.kv_sum = Tensor::uninit({cfg.n_kv_head * kv_slot()}, qkv.weight.grad.dtype(), qkv.weight.grad.device(),
                              MemTag::Activation);
  kernels::fill(a.kv_sum, 0.0f);
}

Tensor CausalSelfAttention::kv_grad_rows(Acts& a, int which, bool bias) {
  const int64_t C = cfg.d_model, rows = hkv * head_dim;
  const int64_t mine = (cfg.tp.rank() / kv_rep) * kv_slot();
  if (!bias) return a.kv_sum.slice0(mine + which * rows * C, mine + (which + 1) * rows * C).reshape({rows, C});
  if (!cfg.qkv_bias) return Tensor();
  const int64_t at = mine + 2 * rows * C + which * rows;
  return a.kv_sum.slice0(at, at + rows);
}

void CausalSelfAttention::sum_shared_kv_grads(Acts& a) {
  all_reduce_sum(cfg.tp, a.kv_sum);
  const Split s = split_of(hq, hkv, head_dim);
  for (int which = 0; which < 2; ++which) {
    Tensor w = qkv.weight.grad.slice0(s.begin[which + 1], s.end[which + 1]);
    kernels::add(w, kv_grad_rows(a, which, false), w);
    if (cfg.qkv_bias) {
      Tensor b = qkv.bias.grad.slice0(s.begin[which + 1], s.end[which + 1]);
      kernels::add(b, kv_grad_rows(a, which, true), b);
    }
  }
}

}  // namespace dt::nn
