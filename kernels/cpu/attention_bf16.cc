// bf16 causal attention on the native bf16 GEMM (native_bf16_gemm: AMX tiles, or the
// backend's AVX512-BF16 kernel): the same query tiles and task order as attention.cc, each
// product on bf16 operands. Scores, their softmax, dP and every accumulation stay f32; P and
// dS are rounded to bf16 once, to be multiplied.
// Reading q, k, v, out and dout as bf16 also removes the f32 copies the widened path makes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/cpu/attention_plan.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/gemm_path.h"

namespace dt::kernels::cpu {
namespace {

using attn::Dims;
using attn::Tile;

const uint16_t* bits(const Tensor& t) { return reinterpret_cast<const uint16_t*>(t.data<bf16>()); }

void round_row(const float* src, int64_t n, uint16_t* dst) {
  for (int64_t j = 0; j < n; ++j) dst[j] = f32_to_bf16_bits(src[j]);
}

// The backward's per-thread scratch: f32 strips of kQueryBlock x tk and their bf16 copies.
struct Scratch {
  std::vector<float> s, dp;
  std::vector<uint16_t> p16, ds16;
  explicit Scratch(const Dims& d)
      : s(kQueryBlock * d.tk), dp(kQueryBlock * d.tk), p16(kQueryBlock * d.tk), ds16(kQueryBlock * d.tk) {}
};

}  // namespace

void attention_tile_bf16(const uint16_t* q, int64_t qld, const uint16_t* k, const uint16_t* v, int64_t kld, int64_t m,
                         int64_t kend, int64_t n0, int64_t d, float scale, uint16_t* out, float* lse, TileScratch& sc) {
  sc.s.resize(m * kend);
  sc.p16.resize(m * kend);
  sc.o.resize(m * d);
  // S = scale * Q K^T over keys [0, kend), then each row's softmax (unnormalized).
  native_bf16_gemm(false, true, m, kend, d, scale, q, qld, k, kld, 0.0f, sc.s.data(), kend);
  float inv[kQueryBlock];
  for (int64_t r = 0; r < m; ++r) {
    float* row = sc.s.data() + r * kend;
    float mx;
    const float sum = attn::exp_row(row, std::min(kend, n0 + r), kend, mx);
    inv[r] = 1.0f / sum;
    if (lse) lse[r] = mx + std::log(sum);
    round_row(row, kend, sc.p16.data() + r * kend);
  }
  // O = P V, each row divided by its sum and rounded once.
  native_bf16_gemm(false, false, m, d, kend, 1.0f, sc.p16.data(), kend, v, kld, 0.0f, sc.o.data(), d);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t e = 0; e < d; ++e) out[r * qld + e] = f32_to_bf16_bits(sc.o[r * d + e] * inv[r]);
}

void attention_forward_bf16(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out, Tensor& lse,
                            bool causal) {
  const Dims s = attn::dims_of(q, k, scale, causal);
  const uint16_t *qp = bits(q), *kp = bits(k), *vp = bits(v);
  uint16_t* op = reinterpret_cast<uint16_t*>(out.data<bf16>());
  float* lp = lse.data<float>();
  const int64_t group = s.hq / s.hkv;
  parallel_for(s.b * s.hq * s.qblocks(), 1, [&](int64_t t0, int64_t t1) {
    TileScratch sc;
    for (int64_t t = t0; t < t1; ++t) {
      int64_t bi, h, blk;
      attn::forward_task(s, t, bi, h, blk);
      const Tile c = attn::tile_of(s, blk);
      attention_tile_bf16(qp + s.qrow(bi, c.i0, h), s.qld(), kp + s.krow(bi, 0, h / group), vp + s.krow(bi, 0, h / group),
                          s.kld(), c.m, c.kend, s.first_row_keys(c.m, c.kend), s.d, s.scale, op + s.qrow(bi, c.i0, h),
                          lp + (bi * s.hq + h) * s.tq + c.i0, sc);
    }
  });
}

// As attention.cc's backward: a task is a (batch, kv head), walking its query heads and
// blocks in a fixed order, so each gradient element is summed by one thread in one order.
void attention_backward_bf16(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                            const Tensor& dout, float scale, Tensor& dq, Tensor& dk, Tensor& dv, bool causal) {
  const Dims s = attn::dims_of(q, k, scale, causal);
  const uint16_t *qp = bits(q), *kp = bits(k), *vp = bits(v), *op = bits(out), *dop = bits(dout);
  const float* lp = lse.data<float>();
  Tensor dq32 = attn::f32_target(dq), dk32 = attn::f32_target(dk), dv32 = attn::f32_target(dv);
  float *dqp = dq32.data<float>(), *dkp = dk32.data<float>(), *dvp = dv32.data<float>();
  const int64_t group = s.hq / s.hkv;
  parallel_for(s.b * s.hkv, 1, [&](int64_t t0, int64_t t1) {
    Scratch sc(s);
    float di[kQueryBlock];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t bi = t / s.hkv, g = t % s.hkv;
      const uint16_t *kb = kp + s.krow(bi, 0, g), *vb = vp + s.krow(bi, 0, g);
      float *dkb = dkp + s.krow(bi, 0, g), *dvb = dvp + s.krow(bi, 0, g);
      attn::zero_kv_grads(dkb, dvb, s.tk, s.kld(), s.d);
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        for (int64_t blk = 0; blk < s.qblocks(); ++blk) {
          const Tile c = attn::tile_of(s, blk);
          const int64_t r0 = s.qrow(bi, c.i0, h), ld = c.kend;
          const uint16_t *qb = qp + r0, *dob = dop + r0;
          const float* lb = lp + (bi * s.hq + h) * s.tq + c.i0;
          native_bf16_gemm(false, true, c.m, c.kend, s.d, s.scale, qb, s.qld(), kb, s.kld(), 0.0f, sc.s.data(),
                        ld);  // S
          native_bf16_gemm(false, true, c.m, c.kend, s.d, 1.0f, dob, s.qld(), vb, s.kld(), 0.0f, sc.dp.data(),
                        ld);  // dP = dO V^T
          for (int64_t r = 0; r < c.m; ++r) {
            float acc = 0.0f;
            const uint16_t *x = dob + r * s.qld(), *y = op + r0 + r * s.qld();
#pragma omp simd reduction(+ : acc)
            for (int64_t e = 0; e < s.d; ++e) acc += bf16_bits_to_f32(x[e]) * bf16_bits_to_f32(y[e]);
            di[r] = acc;
          }
          for (int64_t r = 0; r < c.m; ++r) {
            float *p = sc.s.data() + r * ld, *d = sc.dp.data() + r * ld;
            attn::grad_row(p, d, s.last_key(c.i0 + r) + 1, ld, lb[r], di[r], s.scale);
            round_row(p, ld, sc.p16.data() + r * ld);
            round_row(d, ld, sc.ds16.data() + r * ld);
          }
          native_bf16_gemm(true, false, c.kend, s.d, c.m, 1.0f, sc.p16.data(), ld, dob, s.qld(), 1.0f, dvb,
                        s.kld());  // dV += P^T dO
          native_bf16_gemm(false, false, c.m, s.d, c.kend, 1.0f, sc.ds16.data(), ld, kb, s.kld(), 0.0f, dqp + r0,
                        s.qld());  // dQ = dS K
          native_bf16_gemm(true, false, c.kend, s.d, c.m, 1.0f, sc.ds16.data(), ld, qb, s.qld(), 1.0f, dkb,
                        s.kld());  // dK += dS^T Q
        }
      }
    }
  });
  cast(dq32, dq);
  cast(dk32, dk);
  cast(dv32, dv);
}

}  // namespace dt::kernels::cpu
