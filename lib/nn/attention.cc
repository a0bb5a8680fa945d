#include "nn/attention.h"

#include "kernels/ops.h"
#include "nn/rope.h"

namespace dt::nn {

namespace {
// Heads per tp rank: the count must divide by the tp size.
int64_t local_heads(const std::string& name, const char* what, int64_t heads, const TpGroup& tp) {
  DT_CHECK(heads % tp.size() == 0, name + ": " + what + " = " + std::to_string(heads) + " does not split over tp = " +
                                       std::to_string(tp.size()) + "; accepted: a tp size that divides " +
                                       std::to_string(heads));
  return heads / tp.size();
}
}  // namespace

CausalSelfAttention::CausalSelfAttention(const std::string& name, const AttentionConfig& c, uint64_t seed,
                                         float proj_std)
    : cfg(c),
      head_dim(c.d_model / c.n_head),
      hq(local_heads(name, "n_head", c.n_head, c.tp)),
      hkv(local_heads(name, "n_kv_head", c.n_kv_head, c.tp)),
      qkv(name + ".qkv", c.d_model, (c.n_head + 2 * c.n_kv_head) * head_dim, c.bias, seed, 0.02f, c.dtype, c.tp,
          {c.n_head * head_dim, c.n_kv_head * head_dim, c.n_kv_head * head_dim}),
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
Tensor rows_of(const Tensor& t, int64_t b, int64_t e) { return t.defined() ? t.slice0(b, e) : t; }
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
    rope_forward(a.q, cfg.rope_base);
    rope_forward(a.k, cfg.rope_base);
  }
  ensure(a.out, {B, T, hq, D}, x.dtype());
  ensure(a.lse, {B, hq, T});
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
  kernels::attention_backward(a.q, a.k, a.v, a.out, a.lse, a.dout, 0.0f, a.dq, a.dk, a.dv);
  if (cfg.rope) {  // back to the gradients of the un-rotated projections
    rope_backward(a.dq, cfg.rope_base);
    rope_backward(a.dk, cfg.rope_base);
  }
  // dx = dq Wq + dk Wk + dv Wv over the whole tokens; each rank's is its heads' share.
  // Under SP the input is gathered again (proj's backward has used the gathered buffer).
  const Tensor x2 = flat2d(gather_tokens(cfg.tp, a.x, {B, T, cfg.d_model}));
  Tensor& part = partial_buffer(cfg.tp, {B, T, cfg.d_model}, a.x.dtype(), dx);
  Tensor dx2 = flat2d(part);
  Split s = split_of(hq, hkv, D);
  const Tensor* src[3] = {&a.dq, &a.dk, &a.dv};
  for (int i = 0; i < 3; ++i) {
    Tensor dy2 = flat2d(src[i]->reshape({B * T, src[i]->dim(2) * D}));
    Tensor dw = qkv.weight.grad.slice0(s.begin[i], s.end[i]);
    Tensor db = rows_of(qkv.bias.grad, s.begin[i], s.end[i]);
    // The first overwrites, the others accumulate.
    linear_backward(dy2, x2, qkv.weight.value.slice0(s.begin[i], s.end[i]), dx2, i > 0, dw, db);
  }
  sum_partial(cfg.tp, part, dx);
}

}  // namespace dt::nn
