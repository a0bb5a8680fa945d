// Fused causal attention with grouped-query heads on the CPU, flash style: each query row
// runs an online softmax over blocks of keys, so no Tq x Tk score matrix is ever stored.
// bf16/f16 tensors are widened to f32 scratch first (CPU compute is f32) and results
// rounded once at the end.
#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_ops.h"

namespace dt::kernels::cpu {
namespace {

constexpr int64_t kKeyBlock = 64;    // keys scored per online-softmax step (a stack tile)
constexpr int64_t kQueryBlock = 16;  // query rows per forward task

struct Dims {
  int64_t b, tq, tk, hq, hkv, d;
  float scale;
  // Row offsets (in elements) of query row i of head h, and key row j of kv head g.
  int64_t qrow(int64_t bi, int64_t i, int64_t h) const { return ((bi * tq + i) * hq + h) * d; }
  int64_t krow(int64_t bi, int64_t j, int64_t g) const { return ((bi * tk + j) * hkv + g) * d; }
  int64_t last_key(int64_t i) const { return tk - tq + i; }  // causal: keys 0..last_key(i)
};

Dims dims_of(const Tensor& q, const Tensor& k, float scale) {
  Dims s{q.dim(0), q.dim(1), k.dim(1), q.dim(2), k.dim(2), q.dim(3), scale};
  if (s.scale <= 0.0f) s.scale = 1.0f / std::sqrt(static_cast<float>(s.d));
  return s;
}

inline float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

inline void axpy(float alpha, const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

// The f32 view of a tensor: itself when already f32, else a widened copy.
Tensor widen(const Tensor& t) {
  if (t.dtype() == DType::F32) return t;
  Tensor w = Tensor::uninit(t.shape(), DType::F32);
  cast(t, w);
  return w;
}
// Where an output is computed: the tensor itself when f32, else f32 scratch cast back by narrow().
Tensor f32_target(const Tensor& t) { return t.dtype() == DType::F32 ? t : Tensor::uninit(t.shape(), DType::F32); }
void narrow(const Tensor& f, Tensor& t) {
  if (t.dtype() != DType::F32) cast(f, t);
}

// One query row: out = softmax(q k^T * scale) v over keys 0..last, and its log-sum-exp.
void forward_row(const Dims& s, const float* q, const float* k, const float* v, int64_t bi, int64_t g, int64_t last,
                 float* out, float* lse) {
  float m = -INFINITY, l = 0.0f, p[kKeyBlock];
  std::fill(out, out + s.d, 0.0f);
  for (int64_t j0 = 0; j0 <= last; j0 += kKeyBlock) {
    int64_t n = std::min(kKeyBlock, last + 1 - j0);
    float bm = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      p[j] = dot(q, k + s.krow(bi, j0 + j, g), s.d) * s.scale;
      bm = std::max(bm, p[j]);
    }
    float mn = std::max(m, bm);
    // Rescale what was accumulated under the old max; exp(-inf) = 0 on the first block.
    float corr = m == -INFINITY ? 0.0f : std::exp(m - mn);
    l *= corr;
    for (int64_t c = 0; c < s.d; ++c) out[c] *= corr;
    for (int64_t j = 0; j < n; ++j) {
      float e = std::exp(p[j] - mn);
      l += e;
      axpy(e, v + s.krow(bi, j0 + j, g), out, s.d);
    }
    m = mn;
  }
  float inv = 1.0f / l;
  for (int64_t c = 0; c < s.d; ++c) out[c] *= inv;
  *lse = m + std::log(l);
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out, Tensor& lse) {
  Dims s = dims_of(q, k, scale);
  Tensor q32 = widen(q), k32 = widen(k), v32 = widen(v), o32 = f32_target(out);
  const float *qp = q32.data<float>(), *kp = k32.data<float>(), *vp = v32.data<float>();
  float *op = o32.data<float>(), *lp = lse.data<float>();
  int64_t qblocks = (s.tq + kQueryBlock - 1) / kQueryBlock, group = s.hq / s.hkv;
  // Tasks are (batch, query head, query block): each output row is written by one task.
  parallel_for(s.b * s.hq * qblocks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t bi = t / (s.hq * qblocks), h = t / qblocks % s.hq, blk = t % qblocks;
      int64_t i1 = std::min(s.tq, (blk + 1) * kQueryBlock);
      for (int64_t i = blk * kQueryBlock; i < i1; ++i) {
        int64_t r = s.qrow(bi, i, h);
        forward_row(s, qp + r, kp, vp, bi, h / group, s.last_key(i), op + r, lp + (bi * s.hq + h) * s.tq + i);
      }
    }
  });
  narrow(o32, out);
}

// Backward recomputes each probability from lse: P = exp(S * scale - lse). Tasks are
// (batch, kv head): a task owns dk/dv of its kv head and dq of the query heads reading it,
// so every gradient element is summed by one thread in a fixed order (thread-count
// independent) without atomics.
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& dout, float scale, Tensor& dq, Tensor& dk, Tensor& dv) {
  Dims s = dims_of(q, k, scale);
  Tensor q32 = widen(q), k32 = widen(k), v32 = widen(v), o32 = widen(out), do32 = widen(dout);
  Tensor dq32 = f32_target(dq), dk32 = f32_target(dk), dv32 = f32_target(dv);
  const float *qp = q32.data<float>(), *kp = k32.data<float>(), *vp = v32.data<float>();
  const float *op = o32.data<float>(), *dop = do32.data<float>(), *lp = lse.data<float>();
  float *dqp = dq32.data<float>(), *dkp = dk32.data<float>(), *dvp = dv32.data<float>();
  int64_t group = s.hq / s.hkv;
  parallel_for(s.b * s.hkv, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t bi = t / s.hkv, g = t % s.hkv;
      for (int64_t j = 0; j < s.tk; ++j) {
        std::fill_n(dkp + s.krow(bi, j, g), s.d, 0.0f);
        std::fill_n(dvp + s.krow(bi, j, g), s.d, 0.0f);
      }
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        for (int64_t i = 0; i < s.tq; ++i) {
          int64_t r = s.qrow(bi, i, h);
          const float *qi = qp + r, *doi = dop + r;
          float* dqi = dqp + r;
          std::fill_n(dqi, s.d, 0.0f);
          float row_lse = lp[(bi * s.hq + h) * s.tq + i];
          float di = dot(doi, op + r, s.d);  // D_i = sum(dO_i * O_i) = sum_j P_ij dP_ij
          for (int64_t j = 0; j <= s.last_key(i); ++j) {
            int64_t kr = s.krow(bi, j, g);
            float p = std::exp(dot(qi, kp + kr, s.d) * s.scale - row_lse);
            float ds = p * (dot(doi, vp + kr, s.d) - di) * s.scale;
            axpy(p, doi, dvp + kr, s.d);  // dV += P^T dO
            axpy(ds, kp + kr, dqi, s.d);  // dQ += scale * dS K
            axpy(ds, qi, dkp + kr, s.d);  // dK += scale * dS^T Q
          }
        }
      }
    }
  });
  narrow(dq32, dq);
  narrow(dk32, dk);
  narrow(dv32, dv);
}

}  // namespace dt::kernels::cpu
