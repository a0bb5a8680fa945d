// The cost model's rates and unit costs, shared by training (engine/plan_cost.cc) and
// serving (engine/plan_serve.cc): a GEMM at the rate of its size, a kernel streaming bytes,
// a collective on the link its group crosses.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/cluster.h"
#include "nn/config.h"

namespace dt::engine::rates {

// What one rank computes with: its rates after sharing the host's cores (CPU) or alone on
// its device (GPU).
struct Rates {
  double mm = 0, mm_call = 0, bw = 0, op_call = 0;
  double attn = 0;                   // the fused attention's FLOP/s
  double core_speed = 1;             // CPU: the rank's speed against one core alone (the pool's, or side by side)
  double speed = 1;                  // core_speed x the cluster's compute efficiency (per-element costs)
  const Cluster* cluster = nullptr;  // its GEMM efficiency by size
};

// A rank's rates among `world` ranks. CPU: a rank alone in its process runs its kernels on
// the pool; ranks side by side run below a core's speed alone (shared caches, memory,
// clocks); both factors measured on a step's mix. GPU: each device at its own rates.
inline Rates rank_rates(const Cluster& cl, bool mixed, int64_t world) {
  Rates r;
  r.core_speed = cl.cpu ? (world == 1 ? cl.pool_speedup : cl.shared_core_speed) : 1.0;
  r.speed = r.core_speed * cl.compute_efficiency;
  r.mm = (mixed ? cl.matmul_flops_16 : cl.matmul_flops_f32) * r.speed;
  r.mm_call = cl.matmul_call_s;
  r.bw = cl.memory_bandwidth * r.speed;
  r.op_call = cl.op_call_s;
  r.attn = (mixed ? cl.attention_flops_16 : cl.attention_flops_f32) * r.speed;
  r.cluster = &cl;
  return r;
}

// One tp rank's share of a layer's widths: query heads and their width, the KV width (a KV
// head held by several ranks when tp exceeds them), the MLP's, the vocabulary's rows; the
// element size and the block's kinds.
struct Widths {
  double C = 0, hq = 0, q = 0, kv = 0, F = 0, V = 0, Vl = 0, e = 0;
  bool swiglu = false, rope = false, learned = false;
};
inline Widths widths_of(const nn::GPTConfig& c, int64_t tp) {  // c resolved
  Widths w;
  const double hd = static_cast<double>(c.head_dim());
  w.C = static_cast<double>(c.d_model);
  w.hq = static_cast<double>(c.n_head / tp);
  w.q = w.hq * hd;
  w.kv = static_cast<double>(c.n_kv_head % tp == 0 ? c.n_kv_head / tp : 1) * hd;
  w.F = static_cast<double>(c.d_ff / tp);
  w.V = static_cast<double>(c.vocab_size);
  w.Vl = static_cast<double>(tp == 1 ? c.vocab_size : (c.vocab_size + tp - 1) / tp);
  w.e = static_cast<double>(dtype_size(c.dtype));
  w.swiglu = c.act == nn::Act::SwiGLU;
  w.rope = c.pos == nn::PosKind::RoPE;
  w.learned = c.pos == nn::PosKind::Learned;
  return w;
}

// `calls` GEMMs of [m, k] x [k, n] at the rate of their size.
inline double gemm(const Rates& r, double m, double k, double n, int calls = 1) {
  const double eff = r.cluster->matmul_rate_at(std::cbrt(m * k * n));
  return calls * (2.0 * m * k * n / (r.mm * eff) + r.mm_call);
}
// `calls` kernels streaming `bytes` between them.
inline double stream(const Rates& r, double bytes, int calls) { return bytes / r.bw + calls * r.op_call; }

// An activation or RoPE pass over `elements`: at its measured cost per element where the
// cluster has one (s_per_element > 0), else from the `bytes` it streams.
inline double per_element(const Rates& r, double elements, double s_per_element, double bytes) {
  return s_per_element > 0 ? elements * s_per_element / r.speed : bytes / r.bw;
}

// The MLP's activation (GELU, or SwiGLU's silu(gate) x up) over `rows` tokens, forward or
// backward: at its measured cost per element, else by its bytes (in and out: GELU 2 and 3,
// SwiGLU 3 and 5 tensors of rows x F).
inline double activation_s(const Rates& r, const Widths& w, double rows, bool backward) {
  const Cluster& cl = *r.cluster;
  const double n = rows * w.F;
  const double per = backward ? (w.swiglu ? cl.swiglu_bwd_s : cl.gelu_bwd_s) : (w.swiglu ? cl.swiglu_fwd_s : cl.gelu_fwd_s);
  const double tensors = backward ? (w.swiglu ? 5.0 : 3.0) : (w.swiglu ? 3.0 : 2.0);
  return per_element(r, n, per, tensors * n * w.e);
}
// RoPE over the q and k of `rows` tokens, forward or backward (0 without RoPE).
inline double rope_s(const Rates& r, const Widths& w, double rows, bool backward) {
  if (!w.rope) return 0.0;
  const double n = rows * (w.q + w.kv);
  return per_element(r, n, backward ? r.cluster->rope_bwd_s : r.cluster->rope_fwd_s, 4.0 * n * w.e);
}

// A collective's time on a link: its calls' latency and its wire bytes at the bandwidth.
inline double comm(const Link& l, double wire_bytes, double calls) { return calls * l.latency + wire_bytes / l.bandwidth; }

// The mesh is ordered {dp, pp, ep, cp, tp} (tp fastest) and hosts hold consecutive ranks:
// a group of `size` ranks `stride` apart crosses hosts when it spans more than a host.
inline const Link& link_of(const Cluster& c, int64_t stride, int64_t size, bool in_process) {
  if (stride * size > c.devices_per_host && c.hosts > 1) return c.inter;
  return c.cpu && !in_process && c.processes.bandwidth > 0 ? c.processes : c.intra;
}

// When jobs of these amounts of work all start together on `cores` shared cores, each
// running one at a time at full speed while no more are runnable than cores, and sharing them
// evenly when more are (as the kernel schedules rank threads): when the last one ends. Ranks
// with uneven work end later than their total work over the cores, because the busiest gets a
// core of its own only once the others are done.
inline double shared_makespan(std::vector<double> work, double cores) {
  std::sort(work.begin(), work.end());
  double t = 0, done = 0;  // every job still running has done `done`
  for (size_t i = 0; i < work.size(); ++i) {
    const double running = static_cast<double>(work.size() - i);
    t += (work[i] - done) / std::min(1.0, cores / running);
    done = work[i];
  }
  return t;
}

}  // namespace dt::engine::rates
