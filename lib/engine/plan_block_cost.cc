#include "engine/plan_block_cost.h"

#include <algorithm>

namespace dt::engine::blocks {

using rates::comm;
using rates::gemm;
using rates::Rates;
using rates::stream;

// A block's attention half: the q, k, v and projection GEMMs, the fused attention (causal:
// half of 4 B hq T^2 D forward, its backward at the cluster's measured ratio; under cp a
// rank's queries see T Tg / cp of the pairs), the norms and residual adds by their bytes,
// RoPE at its measured cost. Context parallelism adds the ring (nn/ring_attention.h): each
// of cp - 1 steps sends K/V on while it computes a block of the attention (its exposed part:
// what the transfer outlasts the step's work), packs the next step's K/V and merges a partial
// output into the running one; backward sends K/V and their gradients' accumulator.
// Backward: twice the GEMM FLOPs (input and weight gradients).
Work attention_work(const Shapes& s, const Rates& r, const Link& cp_link, double& cp_comm) {
  const double mm_f = 2.0 * s.R * s.C * (2.0 * s.q + 2.0 * s.kv);
  const double gemm_f = gemm(r, s.R, s.C, s.q) + gemm(r, s.R, s.C, s.kv, 2) + gemm(r, s.R, s.q, s.C);
  const double attn_f = 2.0 * s.B * s.hq * s.T * s.Tg * (s.q / s.hq);
  Work w;
  w.f = gemm_f + attn_f / r.attn + stream(r, 5.0 * s.Rl * s.C * s.e, s.rope ? 5 : 3) + rates::rope_s(r, s, s.R, false);
  w.b = 2.0 * gemm_f + r.cluster->attention_backward_ratio * attn_f / r.attn + stream(r, 8.0 * s.Rl * s.C * s.e, s.rope ? 6 : 4) +
        rates::rope_s(r, s, s.R, true);
  w.flops = 3.0 * mm_f + 3.5 * attn_f;
  cp_comm = 0;
  if (s.cp > 1) {
    const double steps = s.cp - 1, kv = 2.0 * s.R * s.kv * 4.0;      // one step's K and V, f32
    const double merge = 0.75 * s.R * (3.0 * s.q * 4.0 + 12.0);      // a partial output merged (1.5 of 2 chunks' rows)
    const double step_f = attn_f / r.attn / s.cp;                    // one step's attention
    const double fwd = steps * std::max(cp_link.latency, cp_link.latency + kv / cp_link.p2p_bw() - step_f);
    const double bwd = steps * std::max(cp_link.latency, cp_link.latency + 2.0 * kv / cp_link.p2p_bw() -
                                                             r.cluster->attention_backward_ratio * step_f);
    w.f += steps * stream(r, 2.0 * kv + merge, 3);
    w.b += steps * stream(r, 4.0 * kv + 2.0 * merge, 5);
    // What the cluster measured beyond these per ring step (a third forward, two backward).
    const double waits = steps * r.cluster->ring_step_s;
    cp_comm = fwd + bwd + waits;
    w.wait_f = waits / 3.0, w.wait_b = 2.0 * waits / 3.0;
    w.f += fwd + w.wait_f;
    w.b += bwd + w.wait_b;
  }
  return w;
}

// An MLP over `rows` rows of width F: its input GEMMs (two for SwiGLU) and output GEMM in
// `calls` equal pieces (a mixture's experts), the activation at its measured cost.
Work mlp_work(const Shapes& s, const Rates& r, double rows, double F, double calls) {
  rates::Widths w = s;
  w.F = F;
  const double m = rows / calls;
  const double g = calls * (gemm(r, m, s.C, F, s.swiglu ? 2 : 1) + gemm(r, m, F, s.C));
  Work out;
  out.f = g + rates::activation_s(r, w, rows, false);
  out.b = 2.0 * g + rates::activation_s(r, w, rows, true);
  out.flops = 3.0 * 2.0 * rows * s.C * F * (s.swiglu ? 3.0 : 2.0);
  return out;
}

// A block's feed-forward half: the dense MLP (its norm region's bytes with it), or a mixture
// of experts (nn/moe.h) over the Rl rows this rank routes: the router's GEMM and top-k, the
// rows permuted to their experts and the outputs combined back, E / ep experts each over an
// even share of the rows they receive (nn::expert_rows: the busiest rank's, whose experts the
// others wait for at the all-to-all), a shared expert over every row; under ep the rows'
// all-to-all to the experts' ranks and back (the counts first), each regrouped by a copy,
// and the same again for the gradients in backward.
Work ffn_work(const Shapes& s, const Rates& r, const Link& ep_link, double& ep_comm) {
  Work w;
  ep_comm = 0;
  if (!s.moe) {
    w = mlp_work(s, r, s.R, s.F, 1);
    w.f += stream(r, 5.0 * s.Rl * s.C * s.e, 3);
    w.b += stream(r, 8.0 * s.Rl * s.C * s.e, 4);
    return w;
  }
  const double R = s.Rl, S = s.rows.kept, rowsC = s.C * s.e;
  w = mlp_work(s, r, s.rows.received, s.Fe, s.E / s.ep);  // the busiest rank's experts set the pace
  if (s.Fs > 0) w += mlp_work(s, r, R, s.Fs, 1);
  const double router = gemm(r, R, s.C, s.E);
  const double routing = R * s.E * (s.e + 8.0) + R * s.k * 16.0;  // logits, probs, top-k, gates, slots
  w.f += router + stream(r, routing + 4.0 * S * rowsC + 7.0 * R * rowsC, 8);
  w.b += 2.0 * router + stream(r, routing + 4.0 * S * rowsC + 3.0 * R * rowsC + 8.0 * R * rowsC, 8);
  w.flops += 3.0 * 2.0 * R * s.C * s.E;
  // What the cluster measured beyond these per routed pair (a third forward, two backward).
  const double per_pair = S * r.cluster->moe_row_s / r.core_speed;
  w.f += per_pair / 3.0;
  w.b += 2.0 * per_pair / 3.0;
  if (s.ep > 1) {
    const double wire = s.rows.received * (s.ep - 1) / s.ep * rowsC;  // one all-to-all's rows from other ranks
    // Forward the counts, dispatch and combine; backward dispatch and combine; each pair
    // regrouped by a copy.
    const double fwd = comm(ep_link, 2.0 * wire, 3.0), bwd = comm(ep_link, 2.0 * wire, 2.0);
    const double regroup = stream(r, 4.0 * s.rows.received * rowsC, 2);
    // What the cluster measured beyond these per all-to-all (three forward, two backward).
    const double waits = r.cluster->ep_exchange_s;
    ep_comm = fwd + bwd + 5.0 * waits;
    w.wait_f += 3.0 * waits, w.wait_b += 2.0 * waits;
    w.f += fwd + regroup + 3.0 * waits;
    w.b += bwd + regroup + 2.0 * waits;
  }
  return w;
}

// The final norm, the head's GEMM over this rank's vocabulary rows, and the cross entropy's
// passes over the logits.
Work head_work(const Shapes& s, const Rates& r) {
  const double mm = 2.0 * s.R * s.C * s.Vl;
  Work w;
  w.f = gemm(r, s.R, s.C, s.Vl) + stream(r, 2.0 * s.Rl * s.C * s.e + 3.0 * s.R * s.Vl * s.e, 3);
  w.b = 2.0 * gemm(r, s.R, s.C, s.Vl) + stream(r, 4.0 * s.Rl * s.C * s.e + 2.0 * s.R * s.Vl * s.e, 3);
  w.flops = 3.0 * mm;
  return w;
}

Work embed_work(const Shapes& s, const Rates& r, bool learned) {
  Work w;
  w.f = stream(r, (learned ? 4.0 : 2.0) * s.Rl * s.C * s.e, learned ? 3 : 1);
  w.b = stream(r, (learned ? 4.0 : 2.0) * s.R * s.C * s.e, learned ? 2 : 1);
  return w;
}

}  // namespace dt::engine::blocks
