// AdamW on the CPU, elementwise over chunks of the pool. Follows PyTorch's formulation:
// decoupled decay (param *= 1 - lr * wd), then
//   param -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps),  bc_i = 1 - beta_i^step.
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_ops.h"

namespace dt::kernels::cpu {
namespace {

struct Coef {
  float decay, beta1, beta2, one_minus_b1, one_minus_b2, step_size, sqrt_bc2, eps, grad_scale;
};

// copy is null when there is no param_copy.
template <class G, class C>
void adamw_chunk(const Coef& k, float* param, const G* grad, float* m, float* v, C* copy, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) {
    float g = to_f32(grad[i]) * k.grad_scale;
    float mi = k.beta1 * m[i] + k.one_minus_b1 * g;
    float vi = k.beta2 * v[i] + k.one_minus_b2 * g * g;
    float p = param[i] * k.decay - k.step_size * mi / (std::sqrt(vi) / k.sqrt_bc2 + k.eps);
    m[i] = mi;
    v[i] = vi;
    param[i] = p;
    if (copy) copy[i] = from_f32<C>(p);
  }
}

// fn(C* copy) with the storage type of param_copy, or a null float* when it is undefined.
template <class Fn> void with_copy(Tensor& copy, Fn&& fn) {
  if (!copy.defined()) return fn(static_cast<float*>(nullptr));
  dispatch_float(copy.dtype(), [&](auto tag) { fn(copy.data<decltype(tag)>()); });
}

}  // namespace

void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p, Tensor& param_copy) {
  // Bias corrections in double: beta2^step underflows gracefully and stays accurate near 1.
  double bc1 = 1.0 - std::pow(static_cast<double>(p.beta1), static_cast<double>(p.step));
  double bc2 = 1.0 - std::pow(static_cast<double>(p.beta2), static_cast<double>(p.step));
  Coef k{static_cast<float>(1.0 - static_cast<double>(p.lr) * p.weight_decay),
         p.beta1,
         p.beta2,
         1.0f - p.beta1,
         1.0f - p.beta2,
         static_cast<float>(p.lr / bc1),
         static_cast<float>(std::sqrt(bc2)),
         p.eps,
         p.grad_scale};
  dispatch_float(grad.dtype(), [&](auto gtag) {
    using G = decltype(gtag);
    with_copy(param_copy, [&](auto* copy) {
      parallel_for(param.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
        adamw_chunk(k, param.data<float>(), grad.data<G>(), m.data<float>(), v.data<float>(), copy, lo, hi);
      });
    });
  });
}

}  // namespace dt::kernels::cpu
