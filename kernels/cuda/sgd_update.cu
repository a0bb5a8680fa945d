// SGD on CUDA, elementwise, with the rule of kernels/update_rules.h (PyTorch's semantics)
// that the CPU kernel uses too.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/update_rules.h"

namespace dt::kernels::cuda {
namespace {

template <class G, class C> struct Sgd {  // buf is null when momentum is 0, copy when unused
  SgdParams s;
  float *param, *buf;
  const G* grad;
  C* copy;
  __device__ void operator()(int64_t i) const {
    float p = rules::sgd_element(s, ld(grad[i]), param[i], buf ? buf + i : nullptr);
    param[i] = p;
    if (copy) copy[i] = st<C>(p);
  }
};

}  // namespace

void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdParams& p, Tensor& param_copy) {
  float* buf = p.momentum != 0.0f ? ptr<float>(momentum_buf) : nullptr;
  with_float(grad.dtype(), [&](auto gtag) {
    using G = typename decltype(gtag)::type;
    with_float(param_copy.defined() ? param_copy.dtype() : DType::F32, [&](auto ctag) {
      using C = typename decltype(ctag)::type;
      C* copy = param_copy.defined() ? ptr<C>(param_copy) : nullptr;
      launch_map(param.device(), param.numel(), Sgd<G, C>{p, ptr<float>(param), buf, ptr<G>(grad), copy},
                 "sgd_update");
    });
  });
}

}  // namespace dt::kernels::cuda
