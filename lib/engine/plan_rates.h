// The cost model's rates and unit costs, shared by training (engine/plan_cost.cc) and
// serving (engine/plan_serve.cc): a GEMM at the rate of its size, a kernel streaming bytes,
// a collective on the link its group crosses.
#pragma once
#include <cmath>
#include <cstdint>

#include "engine/cluster.h"

namespace dt::engine::rates {

// What one rank computes with: its rates after sharing the host's cores (CPU) or alone on
// its device (GPU).
struct Rates {
  double mm = 0, mm_call = 0, bw = 0, op_call = 0;
  double speed = 1;                  // the rank's speed against one core alone (per-element costs)
  const Cluster* cluster = nullptr;  // its GEMM efficiency by size
};

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

// A collective's time on a link: its calls' latency and its wire bytes at the bandwidth.
inline double comm(const Link& l, double wire_bytes, double calls) { return calls * l.latency + wire_bytes / l.bandwidth; }

// The mesh is ordered {dp, pp, ep, cp, tp} (tp fastest) and hosts hold consecutive ranks:
// a group of `size` ranks `stride` apart crosses hosts when it spans more than a host.
inline const Link& link_of(const Cluster& c, int64_t stride, int64_t size, bool in_process) {
  if (stride * size > c.devices_per_host && c.hosts > 1) return c.inter;
  return c.cpu && !in_process && c.processes.bandwidth > 0 ? c.processes : c.intra;
}

}  // namespace dt::engine::rates
