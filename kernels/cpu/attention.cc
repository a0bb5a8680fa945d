// Fused causal attention with grouped-query heads on the CPU. The products run as sgemm on
// tiles: a block of kQueryBlock queries is scored against every key it may see in one
// call, giving a kQueryBlock x Tk score strip (per-thread scratch; never Tq x Tk), which
// is softmaxed in place and multiplied into V by a second call. bf16/f16 tensors are
// widened to f32 scratch first (CPU compute is f32) and results rounded once at the end;
// where bf16 GEMMs run natively (AMX or AVX512-BF16), bf16 attention takes
// attention_bf16.cc's path instead.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "core/thread_pool.h"
#include "kernels/cpu/attention_plan.h"
#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/gemm_path.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/fast_math.h"

namespace dt::kernels::cpu {
namespace {

using attn::Dims;
using attn::dims_of;
using attn::forward_task;
using attn::Tile;
using attn::tile_of;

inline float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Per-thread scratch, allocated once per chunk of tasks (so once per thread per call).
std::unique_ptr<float[]> strip(const Dims& s) { return std::unique_ptr<float[]>(new float[kQueryBlock * s.tk]); }

// The f32 view of a tensor: itself when already f32, else a widened copy.
Tensor widen(const Tensor& t) {
  if (t.dtype() == DType::F32) return t;
  Tensor w = Tensor::uninit(t.shape(), DType::F32);
  cast(t, w);
  return w;
}
void narrow(const Tensor& f, Tensor& t) {
  if (t.dtype() != DType::F32) cast(f, t);
}

}  // namespace

void attention_tile(const float* q, int64_t qld, const float* k, const float* v, int64_t kld, int64_t m, int64_t kend,
                    int64_t n0, int64_t d, float scale, float* out, float* lse, float* strip) {
  float inv[kQueryBlock];
  // S = scale * Q_blk K^T over keys [0, kend).
  sgemm(false, true, m, kend, d, scale, q, qld, k, kld, 0.0f, strip, kend);
  for (int64_t r = 0; r < m; ++r) {
    float mx;
    const float sum = attn::exp_row(strip + r * kend, std::min(kend, n0 + r), kend, mx);
    inv[r] = 1.0f / sum;
    if (lse) lse[r] = mx + std::log(sum);
  }
  // O = P V with unnormalized P; each row is divided by its sum after (D per row, not Tk).
  sgemm(false, false, m, d, kend, 1.0f, strip, kend, v, kld, 0.0f, out, qld);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t e = 0; e < d; ++e) out[r * qld + e] *= inv[r];
}

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out, Tensor& lse,
                       bool causal) {
  if (q.dtype() == DType::BF16 && gemm_choice().bf16_native)
    return attention_forward_bf16(q, k, v, scale, out, lse, causal);
  Dims s = dims_of(q, k, scale, causal);
  Tensor q32 = widen(q), k32 = widen(k), v32 = widen(v), o32 = attn::f32_target(out);
  const float *qp = q32.data<float>(), *kp = k32.data<float>(), *vp = v32.data<float>();
  float *op = o32.data<float>(), *lp = lse.data<float>();
  int64_t group = s.hq / s.hkv;
  // Each task writes only its own rows of out and lse, so the split never changes a bit.
  parallel_for(s.b * s.hq * s.qblocks(), 1, [&](int64_t t0, int64_t t1) {
    std::unique_ptr<float[]> sc = strip(s);
    for (int64_t t = t0; t < t1; ++t) {
      int64_t bi, h, blk;
      forward_task(s, t, bi, h, blk);
      Tile c = tile_of(s, blk);
      const float *qb = qp + s.qrow(bi, c.i0, h), *kb = kp + s.krow(bi, 0, h / group);
      const float* vb = vp + s.krow(bi, 0, h / group);
      float* ob = op + s.qrow(bi, c.i0, h);
      attention_tile(qb, s.qld(), kb, vb, s.kld(), c.m, c.kend, s.first_row_keys(c.m, c.kend), s.d, s.scale, ob, lp + (bi * s.hq + h) * s.tq + c.i0,
                     sc.get());
    }
  });
  narrow(o32, out);
}

// Backward recomputes each probability from lse: P = exp(S * scale - lse). Tasks are
// (batch, kv head): a task owns dk/dv of its kv head and dq of the query heads reading it,
// and walks those heads and their query blocks in a fixed order, so every gradient element
// is summed by one thread in the same order whatever the thread count, without atomics.
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& dout, float scale, Tensor& dq, Tensor& dk, Tensor& dv, bool causal) {
  if (q.dtype() == DType::BF16 && gemm_choice().bf16_native)
    return attention_backward_bf16(q, k, v, out, lse, dout, scale, dq, dk, dv, causal);
  Dims s = dims_of(q, k, scale, causal);
  Tensor q32 = widen(q), k32 = widen(k), v32 = widen(v), o32 = widen(out), do32 = widen(dout);
  Tensor dq32 = attn::f32_target(dq), dk32 = attn::f32_target(dk), dv32 = attn::f32_target(dv);
  const float *qp = q32.data<float>(), *kp = k32.data<float>(), *vp = v32.data<float>();
  const float *op = o32.data<float>(), *dop = do32.data<float>(), *lp = lse.data<float>();
  float *dqp = dq32.data<float>(), *dkp = dk32.data<float>(), *dvp = dv32.data<float>();
  int64_t group = s.hq / s.hkv;
  parallel_for(s.b * s.hkv, 1, [&](int64_t t0, int64_t t1) {
    std::unique_ptr<float[]> ps = strip(s), ds = strip(s);  // P, then dP turned into dS
    float di[kQueryBlock];
    for (int64_t t = t0; t < t1; ++t) {
      int64_t bi = t / s.hkv, g = t % s.hkv;
      const float *kb = kp + s.krow(bi, 0, g), *vb = vp + s.krow(bi, 0, g);
      float *dkb = dkp + s.krow(bi, 0, g), *dvb = dvp + s.krow(bi, 0, g);
      attn::zero_kv_grads(dkb, dvb, s.tk, s.kld(), s.d);
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        for (int64_t blk = 0; blk < s.qblocks(); ++blk) {
          Tile c = tile_of(s, blk);
          int64_t r0 = s.qrow(bi, c.i0, h), ld = c.kend;
          const float *qb = qp + r0, *dob = dop + r0, *lb = lp + (bi * s.hq + h) * s.tq + c.i0;
          sgemm(false, true, c.m, c.kend, s.d, s.scale, qb, s.qld(), kb, s.kld(), 0.0f, ps.get(), ld);  // S
          sgemm(false, true, c.m, c.kend, s.d, 1.0f, dob, s.qld(), vb, s.kld(), 0.0f, ds.get(), ld);    // dP = dO V^T
          for (int64_t r = 0; r < c.m; ++r) di[r] = dot(dob + r * s.qld(), op + r0 + r * s.qld(), s.d);
          for (int64_t r = 0; r < c.m; ++r)
            attn::grad_row(ps.get() + r * ld, ds.get() + r * ld, s.last_key(c.i0 + r) + 1, ld, lb[r], di[r], s.scale);
          sgemm(true, false, c.kend, s.d, c.m, 1.0f, ps.get(), ld, dob, s.qld(), 1.0f, dvb, s.kld());  // dV += P^T dO
          sgemm(false, false, c.m, s.d, c.kend, 1.0f, ds.get(), ld, kb, s.kld(), 0.0f, dqp + r0, s.qld());  // dQ = dS K
          sgemm(true, false, c.kend, s.d, c.m, 1.0f, ds.get(), ld, qb, s.qld(), 1.0f, dkb, s.kld());  // dK += dS^T Q
        }
      }
    }
  });
  narrow(dq32, dq);
  narrow(dk32, dk);
  narrow(dv32, dv);
}

}  // namespace dt::kernels::cpu
