// Context parallelism's attention: ring attention over the cp group (Liu et al., and the
// zig-zag placement Megatron Core and torchtitan use for causal models).
//
// Placement. A sequence of T tokens is cut into 2 cp chunks of c = T / (2 cp); rank r holds
// chunks r and 2 cp - 1 - r, in that order, as its local sequence of 2c rows. Causal work
// grows with a chunk's position, so pairing an early chunk with a late one gives every rank
// the same work. Every layer that reads positions (learned positions, RoPE) reads them from
// CpGroup::position; everything else in a block is per token and runs on the local rows.
//
// Forward. Each rank starts from its own K/V: its two chunks are in position order, so the
// plain causal kernel over the local 2c rows is exactly their attention (chunk r before
// chunk 2cp-1-r). Then cp - 1 steps round the ring: the K/V of rank j = r - s arrive from
// the left neighbour, and
//   j < r: chunk j precedes both local chunks, and chunk 2cp-1-j follows both: every
//          local query sees every key of chunk j (one non-causal call, 2c x c);
//   j > r: both of j's chunks lie between the local ones: the later local chunk sees all
//          of them, the earlier none (one non-causal call, c x 2c);
// so every step costs the same. Each partial result (output rows and their log-sum-exp) is
// merged into the running one: L = logaddexp(L_a, L_b), O = e^(L_a - L) O_a + e^(L_b - L) O_b.
// The next step's K/V are in flight (sent right, received from the left) while a step
// computes.
//
// Backward, from the merged output and log-sum-exp (which is what flash attention's
// backward takes, so each block's gradients are its share): dQ stays local; the K/V travel
// the ring again, and with them an accumulator of their dK/dV that each rank adds its share
// to and passes on; after the last step it reaches its owner, which adds it to its own.
//
// Bytes per layer and rank: forward (cp - 1) x K and V (2 x B x 2c x Hkv x D elements, f32);
// backward twice that (K/V and their gradients). Computation is f32 on the CPU (bf16 and f16
// tensors are widened; outputs rounded once). Collective over cp; every rank calls it with
// its own chunks of the same sequences.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "core/tensor.h"

namespace dt::nn {

// The group a sequence splits over; comm null: cp = 1 (positions are 0 .. T - 1).
struct CpGroup {
  comm::Communicator* comm = nullptr;
  int size() const { return comm ? comm->size() : 1; }
  int rank() const { return comm ? comm->rank() : 0; }
  // The global position of local row t of a local sequence of T rows (T = 2c: chunk rank(),
  // then chunk 2 size() - 1 - rank()).
  int64_t position(int64_t t, int64_t T) const;
  std::vector<int64_t> positions(int64_t T) const;
  // The global columns this rank keeps of a sequence of T_global tokens, in local order.
  std::vector<int64_t> columns(int64_t T_global) const { return positions(T_global / size()); }
};

// The bytes one rank sends round the ring per layer: forward (backward = 2x), for a local
// sequence of T rows. The formula --report and dtrain plan print.
int64_t ring_bytes_forward(int cp, int64_t B, int64_t T, int64_t hkv, int64_t d);

// q: [B, T, Hq, D], k, v: [B, T, Hkv, D], this rank's 2 chunks; out [B, T, Hq, D], lse f32
// [B, Hq, T] as kernels::attention_forward (causal over the global sequence). Collective.
void ring_attention_forward(const CpGroup& cp, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                            Tensor& lse);
// dq, dk, dv overwritten (this rank's rows). Collective.
void ring_attention_backward(const CpGroup& cp, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                             const Tensor& lse, const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv);

}  // namespace dt::nn
