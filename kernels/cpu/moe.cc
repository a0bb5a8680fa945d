// Mixture of experts on the CPU: routing (top-k of a row's scores, the gates, and the
// statistics the auxiliary losses need) and its gradient, one row per task; dispatch and
// combine as row copies and gate-weighted row sums, one output row per task (every slot
// names one (row, choice), so no two tasks write one row). Math in f32.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/row_f32.h"

namespace dt::kernels::cpu {
namespace {

float sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }

void check_slots(const char* op, const Tensor& slots, int64_t s) {
  const int32_t* p = slots.data<int32_t>();
  for (int64_t i = 0; i < slots.numel(); ++i)
    if (p[i] >= s)
      invalid(std::string(op) + ": slots entry " + std::to_string(i) + " holds " + std::to_string(p[i]) +
              ", out of range; accepted: [0, " + std::to_string(s) + "), the permuted rows, or < 0 for dropped");
}

// The k largest of z[0, E) in descending order, a tie to the lower index.
void top_k(const float* z, int64_t e, int64_t k, int32_t* out, std::vector<char>& taken) {
  taken.assign(static_cast<size_t>(e), 0);
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = -1;
    for (int64_t i = 0; i < e; ++i)
      if (!taken[static_cast<size_t>(i)] && (best < 0 || z[i] > z[best])) best = i;
    taken[static_cast<size_t>(best)] = 1;
    out[j] = static_cast<int32_t>(best);
  }
}

}  // namespace

void moe_route(const Tensor& logits, int64_t k, MoeGating gating, bool renormalize, Tensor& idx, Tensor& gates,
               Tensor& probs, Tensor& lse) {
  const int64_t E = logits.dim(1);
  dispatch_float(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_for(logits.dim(0), grain_for(E * k), [&](int64_t r0, int64_t r1) {
      std::vector<float> buf(static_cast<size_t>(E));
      std::vector<char> taken;
      for (int64_t r = r0; r < r1; ++r) {
        const float* z = row_f32(logits.data<T>() + r * E, E, buf.data());
        float mx = -INFINITY;
        for (int64_t e = 0; e < E; ++e) mx = std::fmax(mx, z[e]);
        float sum = 0.0f;
        for (int64_t e = 0; e < E; ++e) sum += std::exp(z[e] - mx);
        const float l = mx + std::log(sum);
        lse.data<float>()[r] = l;
        float* s = probs.data<float>() + r * E;
        for (int64_t e = 0; e < E; ++e) s[e] = std::exp(z[e] - l);
        int32_t* id = idx.data<int32_t>() + r * k;
        top_k(z, E, k, id, taken);  // scores rise with the logits under either gating
        float* g = gates.data<float>() + r * k;
        float total = 0.0f;
        for (int64_t j = 0; j < k; ++j) {
          g[j] = gating == MoeGating::Softmax ? s[id[j]] : sigmoid(z[id[j]]);
          total += g[j];
        }
        if (renormalize)
          for (int64_t j = 0; j < k; ++j) g[j] /= total;
      }
    });
  });
}

void moe_route_backward(const Tensor& logits, const Tensor& idx, const Tensor& gates, const Tensor& probs,
                        const Tensor& lse, const Tensor& dgates, const Tensor& aux_coef, float z_coef,
                        MoeGating gating, bool renormalize, Tensor& dlogits) {
  const int64_t E = logits.dim(1), k = idx.dim(1);
  const float* c = aux_coef.data<float>();
  dispatch_float(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_for(logits.dim(0), grain_for(E * k), [&](int64_t r0, int64_t r1) {
      std::vector<float> zbuf(static_cast<size_t>(E)), a(static_cast<size_t>(E)), obuf(static_cast<size_t>(E));
      std::vector<float> dp(static_cast<size_t>(k));
      for (int64_t r = r0; r < r1; ++r) {
        const float* z = row_f32(logits.data<T>() + r * E, E, zbuf.data());
        const float* s = probs.data<float>() + r * E;
        const int32_t* id = idx.data<int32_t>() + r * k;
        const float* g = gates.data<float>() + r * k;
        const float* dg = dgates.data<float>() + r * k;
        // Through the renormalisation g_j = p_j / sum(p): dp_j = (dg_j - sum_i dg_i g_i) / sum(p).
        float p_sum = 0.0f, dot = 0.0f;
        for (int64_t j = 0; j < k; ++j) {
          p_sum += gating == MoeGating::Softmax ? s[id[j]] : sigmoid(z[id[j]]);
          dot += dg[j] * g[j];
        }
        for (int64_t j = 0; j < k; ++j) dp[j] = renormalize ? (dg[j] - dot) / p_sum : dg[j];
        // Through the softmax: the aux loss's coefficients, and the gates' under softmax gating.
        for (int64_t e = 0; e < E; ++e) a[e] = c[e];
        if (gating == MoeGating::Softmax)
          for (int64_t j = 0; j < k; ++j) a[id[j]] += dp[j];
        float as = 0.0f;
        for (int64_t e = 0; e < E; ++e) as += a[e] * s[e];
        float* o = out_f32(dlogits.data<T>() + r * E, obuf.data());
        const float zl = z_coef * lse.data<float>()[r];
        for (int64_t e = 0; e < E; ++e) o[e] = s[e] * (a[e] - as + zl);
        if (gating == MoeGating::Sigmoid)
          for (int64_t j = 0; j < k; ++j) {
            const float p = sigmoid(z[id[j]]);
            o[id[j]] += dp[j] * p * (1.0f - p);
          }
        store_row(o, E, dlogits.data<T>() + r * E);
      }
    });
  });
}

void moe_permute(const Tensor& x, const Tensor& slots, Tensor& xp) {
  check_slots("moe_permute", slots, xp.dim(0));
  const int64_t k = slots.dim(1);
  const size_t row_bytes = static_cast<size_t>(x.dim(1)) * dtype_size(x.dtype());
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(xp.raw());
  const int32_t* sl = slots.data<int32_t>();
  parallel_for(x.dim(0), std::max<int64_t>(1, (1 << 15) / (x.dim(1) * k)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = 0; j < k; ++j)
        if (sl[r * k + j] >= 0) std::memcpy(dst + sl[r * k + j] * row_bytes, src + r * row_bytes, row_bytes);
  });
}

// Shared by the permutation's gradient and the combine: out[r] = sum_j w(r, j) * src[slot].
namespace {
template <class W>
void gather_sum(const Tensor& src, const Tensor& slots, Tensor& out, W weight) {
  const int64_t C = out.dim(1), k = slots.dim(1);
  const int32_t* sl = slots.data<int32_t>();
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_for(out.dim(0), grain_for(C * k), [&](int64_t r0, int64_t r1) {
      std::vector<float> acc(static_cast<size_t>(C)), buf(static_cast<size_t>(C));
      for (int64_t r = r0; r < r1; ++r) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t j = 0; j < k; ++j) {
          const int32_t s = sl[r * k + j];
          if (s < 0) continue;
          const float w = weight(r * k + j);
          const float* y = row_f32(src.data<T>() + s * C, C, buf.data());
          for (int64_t i = 0; i < C; ++i) acc[static_cast<size_t>(i)] += w * y[i];
        }
        T* o = out.data<T>() + r * C;
        for (int64_t i = 0; i < C; ++i) o[i] = from_f32<T>(acc[static_cast<size_t>(i)]);
      }
    });
  });
}
}  // namespace

void moe_permute_backward(const Tensor& dxp, const Tensor& slots, Tensor& dx) {
  check_slots("moe_permute_backward", slots, dxp.dim(0));
  gather_sum(dxp, slots, dx, [](int64_t) { return 1.0f; });
}

void moe_unpermute(const Tensor& yp, const Tensor& slots, const Tensor& gates, Tensor& out) {
  check_slots("moe_unpermute", slots, yp.dim(0));
  const float* g = gates.data<float>();
  gather_sum(yp, slots, out, [g](int64_t i) { return g[i]; });
}

void moe_unpermute_backward(const Tensor& dout, const Tensor& yp, const Tensor& slots, const Tensor& gates,
                            Tensor& dyp, Tensor& dgates) {
  check_slots("moe_unpermute_backward", slots, yp.dim(0));
  const int64_t C = dout.dim(1), k = slots.dim(1);
  const int32_t* sl = slots.data<int32_t>();
  const float* g = gates.data<float>();
  float* dg = dgates.data<float>();
  dispatch_float(dout.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_for(dout.dim(0), grain_for(C * k), [&](int64_t r0, int64_t r1) {
      std::vector<float> dbuf(static_cast<size_t>(C)), ybuf(static_cast<size_t>(C));
      for (int64_t r = r0; r < r1; ++r) {
        const float* d = row_f32(dout.data<T>() + r * C, C, dbuf.data());
        for (int64_t j = 0; j < k; ++j) {
          const int32_t s = sl[r * k + j];
          if (s < 0) {
            dg[r * k + j] = 0.0f;
            continue;
          }
          const float* y = row_f32(yp.data<T>() + s * C, C, ybuf.data());
          float dot = 0.0f;
          for (int64_t i = 0; i < C; ++i) dot += d[i] * y[i];
          dg[r * k + j] = dot;
          T* o = dyp.data<T>() + s * C;
          for (int64_t i = 0; i < C; ++i) o[i] = from_f32<T>(g[r * k + j] * d[i]);
        }
      }
    });
  });
}

}  // namespace dt::kernels::cpu
