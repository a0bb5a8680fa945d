// How the CPU attention divides its work, shared by the f32 path (attention.cc) and the bf16
// native-GEMM path (attention_bf16.cc) so both visit the same tiles in the same order.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/tensor.h"
#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/fast_math.h"

namespace dt::kernels::cpu::attn {

struct Dims {
  int64_t b, tq, tk, hq, hkv, d;
  float scale;
  bool causal = true;  // false: every query sees every key (a K/V block wholly in the past)
  // Row offsets (in elements) of query row i of head h, and key row j of kv head g; rows of
  // one head are qld / kld apart, which is the leading dimension handed to the GEMM.
  int64_t qrow(int64_t bi, int64_t i, int64_t h) const { return ((bi * tq + i) * hq + h) * d; }
  int64_t krow(int64_t bi, int64_t j, int64_t g) const { return ((bi * tk + j) * hkv + g) * d; }
  int64_t qld() const { return hq * d; }
  int64_t kld() const { return hkv * d; }
  int64_t last_key(int64_t i) const { return causal ? tk - tq + i : tk - 1; }  // keys 0..last_key(i)
  // The unmasked keys of row 0 of a tile of m rows ending at kend (row r has min(kend, n0 + r)).
  int64_t first_row_keys(int64_t m, int64_t kend) const { return causal ? kend - m + 1 : kend; }
  int64_t qblocks() const { return (tq + kQueryBlock - 1) / kQueryBlock; }
};

// Where an output is computed: the tensor itself when f32, else f32 scratch cast back after.
inline Tensor f32_target(const Tensor& t) {
  return t.dtype() == DType::F32 ? t : Tensor::uninit(t.shape(), DType::F32);
}

inline Dims dims_of(const Tensor& q, const Tensor& k, float scale, bool causal) {
  Dims s{q.dim(0), q.dim(1), k.dim(1), q.dim(2), k.dim(2), q.dim(3), scale, causal};
  if (s.scale <= 0.0f) s.scale = 1.0f / std::sqrt(static_cast<float>(s.d));
  return s;
}

// One tile: queries [i0, i0 + m) of a head, which see keys [0, kend) (kend = one past the
// causal limit of the tile's last query).
struct Tile {
  int64_t i0, m, kend;
};
inline Tile tile_of(const Dims& s, int64_t blk) {
  int64_t i0 = blk * kQueryBlock, m = std::min(kQueryBlock, s.tq - i0);
  return {i0, m, s.last_key(i0 + m - 1) + 1};
}

// Forward task t -> (batch, head, query block). parallel_for hands each thread one
// contiguous run of tasks, and a block's cost grows with its position (causal), so blocks
// are visited in the order 0, n-1, 1, n-2, ...: any contiguous run then averages out.
inline void forward_task(const Dims& s, int64_t t, int64_t& bi, int64_t& h, int64_t& blk) {
  int64_t nb = s.qblocks(), slot = t / (s.b * s.hq), bh = t % (s.b * s.hq);
  bi = bh / s.hq, h = bh % s.hq;
  blk = slot % 2 == 0 ? slot / 2 : nb - 1 - slot / 2;
}

// One score row over keys [0, kend), of which [0, n) are unmasked, turned in place into
// exp(s - max) (masked keys 0, so they weigh nothing in P V); returns the row's sum and sets
// mx to its max (lse = mx + log(sum)).
inline float exp_row(float* row, int64_t n, int64_t kend, float& mx) {
  mx = -INFINITY;
  float sum = 0.0f;
  // Written as a compare-select: GCC vectorizes std::max here ~8x slower.
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < n; ++j) mx = row[j] > mx ? row[j] : mx;
  const float m = mx;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    row[j] = exp_approx(row[j] - m);
    sum += row[j];
  }
  std::fill(row + n, row + kend, 0.0f);
  return sum;
}

// The backward's row: p holds scores, d holds dP over [0, n) (masked to ld). Afterwards
// p = P = exp(S - lse) and d = dS = P * (dP - D_i) * scale, with D_i = sum(dO_i * O_i).
inline void grad_row(float* p, float* d, int64_t n, int64_t ld, float lse, float di, float scale) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    p[j] = exp_approx(p[j] - lse);
    d[j] = p[j] * (d[j] - di) * scale;
  }
  std::fill(p + n, p + ld, 0.0f);
  std::fill(d + n, d + ld, 0.0f);
}

// Zeroes the tk rows (kld apart, d wide) of one kv head's dk and dv.
inline void zero_kv_grads(float* dk, float* dv, int64_t tk, int64_t kld, int64_t d) {
  for (int64_t j = 0; j < tk; ++j) {
    std::fill_n(dk + j * kld, d, 0.0f);
    std::fill_n(dv + j * kld, d, 0.0f);
  }
}

}  // namespace dt::kernels::cpu::attn

namespace dt::kernels::cpu {

// bf16 attention with its products on the native bf16 GEMM (attention_bf16.cc): the f32 path's tiles and
// order, with S, dP and the outputs accumulated in f32 and P and dS rounded to bf16 for the
// products that take them (as GPU flash attention does). Only when gemm_choice().bf16_native
// (AMX tiles or the backend's AVX512-BF16 kernel).
void attention_forward_bf16(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out, Tensor& lse,
                            bool causal);
void attention_backward_bf16(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                            const Tensor& dout, float scale, Tensor& dq, Tensor& dk, Tensor& dv, bool causal);

}  // namespace dt::kernels::cpu
