// SGD on the CPU with PyTorch's semantics, elementwise over chunks of the pool:
//   g = grad * grad_scale + wd * param
//   buf = momentum * buf + (1 - dampening) * g;  g = nesterov ? g + momentum * buf : buf
//   param -= lr * g
// PyTorch seeds buf with the first g; a caller gets exactly that by passing a zeroed buffer
// and dampening 0 on the first step.
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/update_rules.h"

namespace dt::kernels::cpu {
namespace {

// buf is null when momentum is 0; copy is null when there is no param_copy.
template <class G, class C>
void sgd_chunk(const SgdParams& s, float* param, const G* grad, float* buf, C* copy, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) {
    float p = rules::sgd_element(s, to_f32(grad[i]), param[i], buf ? buf + i : nullptr);
    param[i] = p;
    if (copy) copy[i] = from_f32<C>(p);
  }
}

template <class Fn> void with_copy(Tensor& copy, Fn&& fn) {
  if (!copy.defined()) return fn(static_cast<float*>(nullptr));
  dispatch_float(copy.dtype(), [&](auto tag) { fn(copy.data<decltype(tag)>()); });
}

}  // namespace

void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdParams& p, Tensor& param_copy) {
  float* buf = p.momentum != 0.0f ? momentum_buf.data<float>() : nullptr;
  dispatch_float(grad.dtype(), [&](auto gtag) {
    using G = decltype(gtag);
    with_copy(param_copy, [&](auto* copy) {
      parallel_for(param.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
        sgd_chunk(p, param.data<float>(), grad.data<G>(), buf, copy, lo, hi);
      });
    });
  });
}

}  // namespace dt::kernels::cpu
