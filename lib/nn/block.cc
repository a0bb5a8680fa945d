#include "nn/block.h"

#include <cmath>

#include "kernels/ops.h"

namespace dt::nn {

namespace {
AttentionConfig attention_config(const GPTConfig& c, TpGroup tp, CpGroup cp) {
  AttentionConfig a;
  a.tp = tp;
  a.cp = cp;
  a.d_model = c.d_model;
  a.n_head = c.n_head;
  a.n_kv_head = c.n_kv_head;
  a.rope = c.pos == PosKind::RoPE;
  a.rope_spec = RopeSpec(c.rope_base, c.rope_scaling);
  a.bias = c.bias;
  a.qkv_bias = c.bias || c.qkv_bias;
  a.dtype = c.dtype;
  return a;
}
// GPT-2: the projections that write into the residual stream start smaller, so the stream's
// variance does not grow with depth (two per block).
float residual_std(const GPTConfig& c) { return 0.02f / std::sqrt(2.0f * static_cast<float>(c.n_layer)); }
}  // namespace

TransformerBlock::TransformerBlock(const std::string& name, const GPTConfig& c, TpGroup tp, EpGroup ep, CpGroup cp)
    : ln1(name + ".ln1", c.d_model, c.norm, c.bias, c.norm_eps, c.dtype),
      attn(name + ".attn", attention_config(c, tp, cp), c.seed, residual_std(c)),
      ln2(name + ".ln2", c.d_model, c.norm, c.bias, c.norm_eps, c.dtype),
      ffn(name, c, tp, residual_std(c), ep) {
  // Under SP the norms see this rank's tokens only: their gradients are partial over tp.
  for (Parameter* p : {&ln1.weight, &ln1.bias, &ln2.weight, &ln2.bias}) p->grad_partial_over_tp = tp.sp();
}

void TransformerBlock::collect(ParamList& list) {
  ln1.collect(list);
  attn.collect(list);
  ln2.collect(list);
  ffn.collect(list);
}

void TransformerBlock::forward(const Tensor& x, const Shape& bt, Acts& a, Tensor& y) {
  const Tensor& h1 = ln1.forward(x, a.ln1);
  const Tensor& att = attn.forward(h1, bt, a.attn);
  ensure(a.r, x.shape(), x.dtype());
  kernels::add(x, att.reshape(x.shape()), a.r);
  const Tensor& h2 = ln2.forward(a.r, a.ln2);
  const Tensor& m = ffn.forward(h2, a.ffn);
  ensure(y, x.shape(), x.dtype());
  kernels::add(a.r, m.reshape(x.shape()), y);
}

void TransformerBlock::backward(const Tensor& dy, Acts& a, Tensor& dx, float grad_scale) {
  const Shape& s = a.r.shape();
  const DType dt = a.r.dtype();
  ensure(a.dh, s, dt);
  ensure(a.dr, s, dt);
  // y = r + ffn(ln2(r)): dr = dy + ln2'(ffn'(dy)).
  ffn.backward(dy, a.ffn, a.dh, grad_scale);
  ln2.backward(a.dh, a.ln2, a.dr);
  kernels::add(a.dr, dy, a.dr);
  // r = x + attn(ln1(x)): dx = dr + ln1'(attn'(dr)). dh is free again (ln2 has read it).
  attn.backward(a.dr, a.attn, a.dh);
  ensure(dx, s, dt);
  ln1.backward(a.dh, a.ln1, dx);
  kernels::add(dx, a.dr, dx);
}

}  // namespace dt::nn
