// Mixture of experts on CUDA, the CPU's contracts (kernels/cpu/moe.cc): routing and its
// gradient a thread per row (E and k are small: a router's row is tens of experts);
// dispatch and combine a thread per element, each output element written by one thread
// in j order, so results match the CPU's order of sums without atomics. Slots >= S are
// rejected before anything is written (one sync, as embedding's ids).
#include <limits>
#include <string>

#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda {
namespace {

void check_slots(const char* op, const Tensor& slots, int64_t s) {
  BadIndex bad = find_bad_index(slots.device(), ptr<int32_t>(slots), slots.numel(),
                                std::numeric_limits<int32_t>::min(), static_cast<int32_t>(s), /*allowed=*/0);
  if (bad.pos < 0) return;
  invalid(std::string(op) + ": slots entry " + std::to_string(bad.pos) + " holds " + std::to_string(bad.value) +
          ", out of range; accepted: [0, " + std::to_string(s) + "), the permuted rows, or < 0 for dropped");
}

template <class T> struct Route {
  const T* logits;
  int64_t e, k;
  bool sigmoid_gating, renormalize;
  int32_t* idx;
  float *gates, *probs, *lse;
  __device__ void operator()(int64_t r) const {
    const T* z = logits + r * e;
    float mx = -INFINITY;
    for (int64_t i = 0; i < e; ++i) mx = fmaxf(mx, ld(z[i]));
    float sum = 0.0f;
    for (int64_t i = 0; i < e; ++i) sum += expf(ld(z[i]) - mx);
    const float l = mx + logf(sum);
    lse[r] = l;
    for (int64_t i = 0; i < e; ++i) probs[r * e + i] = expf(ld(z[i]) - l);
    int32_t* id = idx + r * k;
    for (int64_t j = 0; j < k; ++j) {  // the k largest, descending, a tie to the lower expert
      int64_t best = -1;
      for (int64_t i = 0; i < e; ++i) {
        bool taken = false;
        for (int64_t q = 0; q < j; ++q) taken = taken || id[q] == i;
        if (!taken && (best < 0 || ld(z[i]) > ld(z[best]))) best = i;
      }
      id[j] = static_cast<int32_t>(best);
    }
    float* g = gates + r * k;
    float total = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      g[j] = sigmoid_gating ? sigmoid(ld(z[id[j]])) : probs[r * e + id[j]];
      total += g[j];
    }
    if (renormalize)
      for (int64_t j = 0; j < k; ++j) g[j] /= total;
  }
};

template <class T> struct RouteBackward {
  const T* logits;
  const int32_t* idx;
  const float *gates, *probs, *lse, *dgates, *aux_coef;
  float z_coef;
  int64_t e, k;
  bool sigmoid_gating, renormalize;
  T* dlogits;
  __device__ void operator()(int64_t r) const {
    const T* z = logits + r * e;
    const float* s = probs + r * e;
    const int32_t* id = idx + r * k;
    const float* g = gates + r * k;
    const float* dg = dgates + r * k;
    float p_sum = 0.0f, dot = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      p_sum += sigmoid_gating ? sigmoid(ld(z[id[j]])) : s[id[j]];
      dot += dg[j] * g[j];
    }
    auto dp = [&](int64_t j) { return renormalize ? (dg[j] - dot) / p_sum : dg[j]; };
    // a[i] = aux_coef[i] (+ the gates' gradient under softmax gating), never stored.
    auto a = [&](int64_t i) {
      float v = aux_coef[i];
      if (!sigmoid_gating)
        for (int64_t j = 0; j < k; ++j)
          if (id[j] == i) v += dp(j);
      return v;
    };
    float as = 0.0f;
    for (int64_t i = 0; i < e; ++i) as += a(i) * s[i];
    const float zl = z_coef * lse[r];
    for (int64_t i = 0; i < e; ++i) {
      float o = s[i] * (a(i) - as + zl);
      if (sigmoid_gating)
        for (int64_t j = 0; j < k; ++j)
          if (id[j] == i) {
            const float p = sigmoid(ld(z[i]));
            o += dp(j) * p * (1.0f - p);
          }
      dlogits[r * e + i] = st<T>(o);
    }
  }
};

template <class T> struct Permute {
  const T* x;
  const int32_t* slots;
  int64_t c, k;
  T* xp;
  __device__ void operator()(int64_t i) const {  // i over [R, k, C]
    const int64_t col = i % c, rj = i / c;
    const int32_t s = slots[rj];
    if (s >= 0) xp[static_cast<int64_t>(s) * c + col] = x[(rj / k) * c + col];
  }
};

// out[r, col] = sum_j w(r, j) * src[slots[r, j], col]; weights null: all 1.
template <class T> struct GatherSum {
  const T* src;
  const int32_t* slots;
  const float* weights;
  int64_t c, k;
  T* out;
  __device__ void operator()(int64_t i) const {
    const int64_t col = i % c, r = i / c;
    float acc = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const int32_t s = slots[r * k + j];
      if (s >= 0) acc += (weights ? weights[r * k + j] : 1.0f) * ld(src[static_cast<int64_t>(s) * c + col]);
    }
    out[i] = st<T>(acc);
  }
};

template <class T> struct ScatterScaled {  // dyp[slots[r, j]] = gates[r, j] * dout[r]
  const T* dout;
  const int32_t* slots;
  const float* gates;
  int64_t c, k;
  T* dyp;
  __device__ void operator()(int64_t i) const {
    const int64_t col = i % c, rj = i / c;
    const int32_t s = slots[rj];
    if (s >= 0) dyp[static_cast<int64_t>(s) * c + col] = st<T>(gates[rj] * ld(dout[(rj / k) * c + col]));
  }
};

template <class T> struct GateDot {  // dgates[r, j] = <dout[r], yp[slots[r, j]]>
  const T *dout, *yp;
  const int32_t* slots;
  int64_t c, k;
  float* dgates;
  __device__ void operator()(int64_t rj) const {
    const int32_t s = slots[rj];
    float dot = 0.0f;
    if (s >= 0)
      for (int64_t col = 0; col < c; ++col)
        dot += ld(dout[(rj / k) * c + col]) * ld(yp[static_cast<int64_t>(s) * c + col]);
    dgates[rj] = dot;
  }
};

}  // namespace

void moe_route(const Tensor& logits, int64_t k, MoeGating gating, bool renormalize, Tensor& idx, Tensor& gates,
               Tensor& probs, Tensor& lse) {
  with_float(logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(logits.device(), logits.dim(0),
               Route<T>{ptr<T>(logits), logits.dim(1), k, gating == MoeGating::Sigmoid, renormalize,
                        ptr<int32_t>(idx), ptr<float>(gates), ptr<float>(probs), ptr<float>(lse)},
               "moe_route");
  });
}

void moe_route_backward(const Tensor& logits, const Tensor& idx, const Tensor& gates, const Tensor& probs,
                        const Tensor& lse, const Tensor& dgates, const Tensor& aux_coef, float z_coef,
                        MoeGating gating, bool renormalize, Tensor& dlogits) {
  with_float(logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(logits.device(), logits.dim(0),
               RouteBackward<T>{ptr<T>(logits), ptr<int32_t>(idx), ptr<float>(gates), ptr<float>(probs),
                                ptr<float>(lse), ptr<float>(dgates), ptr<float>(aux_coef), z_coef, logits.dim(1),
                                idx.dim(1), gating == MoeGating::Sigmoid, renormalize, ptr<T>(dlogits)},
               "moe_route_backward");
  });
}

void moe_permute(const Tensor& x, const Tensor& slots, Tensor& xp) {
  check_slots("moe_permute", slots, xp.dim(0));
  with_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(x.device(), slots.numel() * x.dim(1),
               Permute<T>{ptr<T>(x), ptr<int32_t>(slots), x.dim(1), slots.dim(1), ptr<T>(xp)}, "moe_permute");
  });
}

void moe_permute_backward(const Tensor& dxp, const Tensor& slots, Tensor& dx) {
  check_slots("moe_permute_backward", slots, dxp.dim(0));
  with_float(dx.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(dx.device(), dx.numel(),
               GatherSum<T>{ptr<T>(dxp), ptr<int32_t>(slots), nullptr, dx.dim(1), slots.dim(1), ptr<T>(dx)},
               "moe_permute_backward");
  });
}

void moe_unpermute(const Tensor& yp, const Tensor& slots, const Tensor& gates, Tensor& out) {
  check_slots("moe_unpermute", slots, yp.dim(0));
  with_float(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(out.device(), out.numel(),
               GatherSum<T>{ptr<T>(yp), ptr<int32_t>(slots), ptr<float>(gates), out.dim(1), slots.dim(1),
                            ptr<T>(out)},
               "moe_unpermute");
  });
}

void moe_unpermute_backward(const Tensor& dout, const Tensor& yp, const Tensor& slots, const Tensor& gates,
                            Tensor& dyp, Tensor& dgates) {
  check_slots("moe_unpermute_backward", slots, yp.dim(0));
  with_float(dout.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t c = dout.dim(1), k = slots.dim(1);
    launch_map(dout.device(), slots.numel() * c,
               ScatterScaled<T>{ptr<T>(dout), ptr<int32_t>(slots), ptr<float>(gates), c, k, ptr<T>(dyp)},
               "moe_unpermute_backward");
    launch_map(dout.device(), slots.numel(),
               GateDot<T>{ptr<T>(dout), ptr<T>(yp), ptr<int32_t>(slots), c, k, ptr<float>(dgates)},
               "moe_unpermute_backward");
  });
}

}  // namespace dt::kernels::cuda
