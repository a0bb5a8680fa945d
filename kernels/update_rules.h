// The per-element rules that the CPU and CUDA kernels share, written once: the optimizer
// updates and the fold of the reduction collectives. Both compile these inline functions
// from the same expressions, so the two can never drift apart in formula; their results
// may still differ in the last bit where nvcc fuses a multiply and an add (-fmad).
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/ops.h"

#ifdef __CUDACC__
#define DT_HOST_DEVICE __host__ __device__
#else
#define DT_HOST_DEVICE
#endif

namespace dt::kernels::rules {

// ---- AdamW, PyTorch's formulation: decoupled decay (param *= 1 - lr * wd), then
//   param -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps),  bc_i = 1 - beta_i^step.
struct AdamWCoef {
  float decay, beta1, beta2, one_minus_b1, one_minus_b2, step_size, sqrt_bc2, eps, grad_scale;
};

inline AdamWCoef adamw_coef(const AdamWParams& p) {
  // Bias corrections in double: beta2^step underflows gracefully and stays accurate near 1.
  double bc1 = 1.0 - std::pow(static_cast<double>(p.beta1), static_cast<double>(p.step));
  double bc2 = 1.0 - std::pow(static_cast<double>(p.beta2), static_cast<double>(p.step));
  return {static_cast<float>(1.0 - static_cast<double>(p.lr) * p.weight_decay),
          p.beta1,
          p.beta2,
          1.0f - p.beta1,
          1.0f - p.beta2,
          static_cast<float>(p.lr / bc1),
          static_cast<float>(std::sqrt(bc2)),
          p.eps,
          p.grad_scale};
}

// Updates one element's moments in place and returns its new value.
DT_HOST_DEVICE inline float adamw_element(const AdamWCoef& k, float grad, float param, float& m, float& v) {
  float g = grad * k.grad_scale;
  float mi = k.beta1 * m + k.one_minus_b1 * g;
  float vi = k.beta2 * v + k.one_minus_b2 * g * g;
  m = mi;
  v = vi;
  return param * k.decay - k.step_size * mi / (sqrtf(vi) / k.sqrt_bc2 + k.eps);
}

// ---- SGD with PyTorch's semantics:
//   g = grad * grad_scale + wd * param
//   buf = momentum * buf + (1 - dampening) * g;  g = nesterov ? g + momentum * buf : buf
//   param -= lr * g
// buf is null when momentum is 0. Returns the new value.
DT_HOST_DEVICE inline float sgd_element(const SgdParams& s, float grad, float param, float* buf) {
  float g = grad * s.grad_scale + s.weight_decay * param;
  if (buf) {
    float b = s.momentum * *buf + (1.0f - s.dampening) * g;
    *buf = b;
    g = s.nesterov ? g + s.momentum * b : b;
  }
  return param - s.lr * g;
}

// ---- the reduction fold: floats accumulate in f32, integers in int64 -------------------
template <class T> using ReduceAcc = std::conditional_t<std::is_integral_v<T>, int64_t, float>;

template <class A> DT_HOST_DEVICE inline bool is_nan(A a) {
  if constexpr (std::is_integral_v<A>) return false;
  else return a != a;
}

// One fold step. Max/Min propagate NaN from either side (fmax would drop it, hiding a
// diverged rank); integer Sum/Prod wrap instead of overflowing (undefined for int64_t).
template <ReduceOp OP, class A> DT_HOST_DEVICE inline A combine(A a, A b) {
  if constexpr (OP == ReduceOp::Sum || OP == ReduceOp::Avg) {
    if constexpr (std::is_integral_v<A>) return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    else return a + b;
  } else if constexpr (OP == ReduceOp::Prod) {
    if constexpr (std::is_integral_v<A>) return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    else return a * b;
  } else if constexpr (OP == ReduceOp::Max) {
    return (a > b || is_nan(a)) ? a : b;
  } else {
    return (a < b || is_nan(a)) ? a : b;
  }
}

}  // namespace dt::kernels::rules
