// AdamW on CUDA, elementwise, with the rule of kernels/update_rules.h that the CPU kernel
// uses too; the bias corrections are computed once on the host in double.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/update_rules.h"

namespace dt::kernels::cuda {
namespace {

template <class G, class C> struct AdamW {  // copy is null when there is no param_copy
  rules::AdamWCoef k;
  float *param, *m, *v;
  const G* grad;
  C* copy;
  __device__ void operator()(int64_t i) const {
    float p = rules::adamw_element(k, ld(grad[i]), param[i], m[i], v[i]);
    param[i] = p;
    if (copy) copy[i] = st<C>(p);
  }
};

}  // namespace

void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p, Tensor& param_copy) {
  const rules::AdamWCoef k = rules::adamw_coef(p);
  with_float(grad.dtype(), [&](auto gtag) {
    using G = typename decltype(gtag)::type;
    with_float(param_copy.defined() ? param_copy.dtype() : DType::F32, [&](auto ctag) {
      using C = typename decltype(ctag)::type;
      C* copy = param_copy.defined() ? ptr<C>(param_copy) : nullptr;
      launch_map(param.device(), param.numel(),
                 AdamW<G, C>{k, ptr<float>(param), ptr<float>(m), ptr<float>(v), ptr<G>(grad), copy}, "adamw_update");
    });
  });
}

}  // namespace dt::kernels::cuda
