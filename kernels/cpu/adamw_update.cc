// AdamW on the CPU, elementwise over chunks of the pool, with the rule of
// kernels/update_rules.h (PyTorch's formulation), shared with the CUDA kernel.
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/update_rules.h"

namespace dt::kernels::cpu {
namespace {

using rules::AdamWCoef;

// copy is null when there is no param_copy. The two loops are written out so that each
// vectorizes (16 lanes: the update is a handful of FMAs, a square root and a division);
// the tensors never overlap, which `omp simd` asserts.
template <class G, class C>
void adamw_chunk(const AdamWCoef& k, float* param, const G* grad, float* m, float* v, C* copy, int64_t lo, int64_t hi) {
  if (!copy) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) param[i] = rules::adamw_element(k, to_f32(grad[i]), param[i], m[i], v[i]);
    return;
  }
#pragma omp simd
  for (int64_t i = lo; i < hi; ++i) {
    float p = rules::adamw_element(k, to_f32(grad[i]), param[i], m[i], v[i]);
    param[i] = p;
    copy[i] = from_f32<C>(p);
  }
}

// fn(C* copy) with the storage type of param_copy, or a null float* when it is undefined.
template <class Fn> void with_copy(Tensor& copy, Fn&& fn) {
  if (!copy.defined()) return fn(static_cast<float*>(nullptr));
  dispatch_float(copy.dtype(), [&](auto tag) { fn(copy.data<decltype(tag)>()); });
}

}  // namespace

void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p, Tensor& param_copy) {
  const AdamWCoef k = rules::adamw_coef(p);
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
