#include "nn/activation_bytes.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace dt::nn {
namespace {

// Sizes of one rank's tensors, named as the Acts name them. R: the micro-batch's token rows,
// Rl: those this rank keeps on the residual stream (R / tp under SP).
struct Dims {
  double e, R, Rl, C, q, kv, F, V;
  int64_t heads;
};

// An MLP's hidden Acts over `rows` rows of width F: GELU keeps h and a, backward da and dh;
// SwiGLU gate, up and a, backward da, dgate and dup. (Its output is its caller's to count.)
double mlp_hidden_bytes(const GPTConfig& c, double rows, double F, double e) {
  return (c.act == Act::SwiGLU ? 6.0 : 4.0) * rows * F * e;
}

// A mixture of experts' Acts (nn/moe.h) for the Rl rows this rank routes (its own under SP):
// the routing (logits [R, E] and their gradient, i32 choices and slots, f32 gates, probs and
// log-sum-exp), the permuted rows and the experts' outputs with their gradients [S, C], the
// combined output, the router's input gradient; each expert's MLP over its rows (whole
// experts: d_ff is not split over tp; their outputs written into the permuted rows); under ep the rows received, their outputs and
// gradients, and the exchange's staging buffer; a shared expert and its gate.
double moe_bytes(const GPTConfig& c, const Dims& d, int64_t ep, double load) {
  const double R = d.Rl, E = static_cast<double>(c.n_experts), k = static_cast<double>(c.top_k), e = d.e;
  const ExpertRows rows = expert_rows(c, R, ep, load);
  const double S = rows.kept, S_in = rows.received;
  // logits and their gradient; i32 choices, f32 gates and their gradient; f32 probs and lse
  // (the slots and the auxiliary losses' coefficients are host tensors the CPU keeps as made).
  const double route = 2.0 * R * E * e + R * k * (4.0 + 4.0 + 4.0) + R * E * 4.0 + R * 4.0;
  double out = route + 4.0 * S * d.C * e + 2.0 * R * d.C * e;  // xp, yp, dyp, dxp; y, dx_router
  // The experts' (S_in rows received), each writing its output rows in place.
  out += mlp_hidden_bytes(c, S_in, static_cast<double>(c.d_ff), e);
  if (ep > 1) out += 5.0 * S_in * d.C * e;  // xr, yr, dyr, dxr, staged
  if (c.moe_shared_d_ff > 0) {
    out += mlp_hidden_bytes(c, R, static_cast<double>(c.moe_shared_d_ff), e) + 2.0 * R * d.C * e;  // its output, dx_shared
    if (c.moe_shared_gate)  // logit, idx, gate, probs, lse, out; dy, dgate, dlogit; a zero aux coefficient
      out += 2.0 * R * e + 4.0 * R * 4.0 + R * d.C * e + R * d.C * e + R * 4.0 + 4.0;
  }
  return out;
}

// A block's Acts (block.h, attention.h, layers.h), forward and backward scratch. The block's
// output is the GPTActs' residual stream, counted there.
double block_bytes(const GPTConfig& c, const Dims& d, int64_t tp, int64_t ep, double load) {
  const double norm = d.Rl * d.C * d.e + 4.0 * d.Rl * (c.norm == NormKind::LayerNorm ? 2.0 : 1.0);  // y, rstd (+ mean)
  const double row_out = d.Rl * d.C * d.e;  // a row-parallel projection's output, this rank's rows
  // attention: q, out, dout, dq (its query heads, every token), k, v, dk, dv, the f32 lse.
  double attn = 4.0 * d.R * d.q * d.e + 4.0 * d.R * d.kv * d.e + 4.0 * d.R * static_cast<double>(d.heads) + row_out;
  if (c.n_kv_head % tp != 0)  // KV heads held by several ranks: their gradients' zeroed sum
    attn += static_cast<double>(c.n_kv_head) * 2.0 * (c.head_dim() * c.d_model + (c.qkv_bias_elems() ? c.head_dim() : 0)) * d.e;
  // MLP: its hidden tensors on every token (SP gathers them), its output on this rank's rows.
  const double mlp = c.moe() ? moe_bytes(c, d, ep, load) : mlp_hidden_bytes(c, d.R, d.F, d.e) + row_out;
  const double residual = 3.0 * d.Rl * d.C * d.e;  // r, and the backward's dr and dh
  return 2.0 * norm + attn + mlp + residual;
}

}  // namespace

ExpertRows expert_rows(const GPTConfig& c, double rows, int64_t ep, double load) {
  DT_CHECK(load == 0 || (load >= 1 && std::isfinite(load)), "expert_rows: load 0 (unstated) or >= 1");
  const double E = static_cast<double>(c.n_experts), pairs = rows * static_cast<double>(c.top_k);
  const double bound = c.moe_capacity > 0 ? E * std::ceil(static_cast<double>(c.moe_capacity) * pairs / E) : 0.0;
  ExpertRows r;
  r.kept = bound > 0 ? std::min(pairs, bound) : pairs;
  if (ep <= 1) {
    r.received = r.kept;  // every expert here: whatever the balance, the rows are the rank's own
  } else if (load == 0) {
    r.received = bound > 0 ? bound : r.kept;
  } else {
    r.received = std::min(r.kept * load, r.kept * static_cast<double>(ep));
    if (bound > 0) r.received = std::min(r.received, bound);
  }
  return r;
}

ActsBytes activation_bytes(const GPTConfig& c, const ActsLayout& l) {
  DT_CHECK(l.batch >= 1 && l.seq >= 1 && l.tp >= 1, "activation_bytes: batch, seq and tp >= 1");
  const int end = l.end < 0 ? static_cast<int>(c.n_layer) : l.end;
  DT_CHECK(0 <= l.begin && l.begin <= end && end <= c.n_layer, "activation_bytes: block range outside the model");
  const bool sp = l.sp && l.tp > 1;
  const double N = static_cast<double>(l.tp), R = static_cast<double>(l.batch * l.seq);
  const int64_t kv_rep = c.n_kv_head % l.tp == 0 ? 1 : l.tp / c.n_kv_head;
  Dims d;
  d.e = static_cast<double>(dtype_size(c.dtype));
  d.R = R;
  d.Rl = sp ? R / N : R;
  d.C = static_cast<double>(c.d_model);
  d.heads = c.n_head / l.tp;
  d.q = static_cast<double>(d.heads * c.head_dim());
  d.kv = static_cast<double>(c.n_kv_head * kv_rep / l.tp * c.head_dim());
  d.F = static_cast<double>(c.d_ff / l.tp);
  d.V = static_cast<double>(l.tp == 1 ? c.vocab_size : (c.vocab_size + l.tp - 1) / l.tp);
  const double stream = d.Rl * d.C * d.e;  // one [Rl, C] tensor of the residual stream
  const double blocks = static_cast<double>(end - l.begin), block = block_bytes(c, d, l.tp, l.ep, l.expert_load);
  ActsBytes out;
  // The residual stream: one output per block, and the input of the first block when this
  // rank makes it (the embedding; a later stage's input is the received tensor).
  double mb = (blocks + (l.embed ? 1.0 : 0.0)) * stream;
  mb += 2.0 * stream;  // backward: dresid and dtmp, swapped block by block
  if (c.checkpoint) {
    out.recompute_saved = blocks * block;
    if (blocks > 0) out.shared += block + stream;  // the one block's scratch and its output
  } else {
    mb += blocks * block;
  }
  if (l.embed) {
    if (l.tp > 1) mb += 4.0 * R;  // the ids of this rank's vocabulary rows
    if (c.pos == PosKind::Learned) mb += 4.0 * R + stream;  // the position ids and their embedding
  }
  if (l.head) {
    const double norm = stream + 4.0 * d.Rl * (c.norm == NormKind::LayerNorm ? 2.0 : 1.0);
    mb += norm;                                  // the final norm
    if (sp) mb += R * d.C * d.e;                 // its output gathered for the head
    mb += 2.0 * R * d.V * d.e;                   // logits and their gradient
    mb += (l.tp > 1 ? 20.0 : 8.0) * R;           // cross entropy's f32 rows (vocab parallel: max, pair, lse)
    mb += sp ? stream : R * d.C * d.e;           // the head's input gradient
  }
  out.per_micro_batch = mb;
  // SP: the model's one gathered and one partial whole-token buffer, re-made when the
  // shape asked for alternates between [B, T, C] and [B T, C] (the new made before the old
  // goes: two of each at that moment).
  if (sp) out.shared += 2.0 * R * d.C * d.e;
  return out;
}

}  // namespace dt::nn
