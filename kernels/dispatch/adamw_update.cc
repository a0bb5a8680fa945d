// adamw_update: validation and dispatch. Hyper-parameters are checked here so a bad
// schedule fails loudly instead of silently corrupting the master weights.
#include <cmath>

#include "kernels/check.h"

namespace dt::kernels {
namespace {

void require_range(const char* op, const char* name, double x, bool ok, const char* accepted) {
  DT_CHECK(ok && !std::isnan(x),
           std::string(op) + ": " + name + " is " + std::to_string(x) + "; accepted: " + accepted);
}

}  // namespace

void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p, Tensor& param_copy) {
  const char* op = "adamw_update";
  require_dtype(op, {param, "param"}, DType::F32);
  require_float(op, {grad, "grad"});
  require_dtype(op, {m, "m"}, DType::F32);
  require_dtype(op, {v, "v"}, DType::F32);
  require_same_shape(op, {{param, "param"}, {grad, "grad"}, {m, "m"}, {v, "v"}});
  require_same_device(op, {{param, "param"}, {grad, "grad"}, {m, "m"}, {v, "v"}});
  if (param_copy.defined()) {
    require_float(op, {param_copy, "param_copy"});
    require_same_shape(op, {{param, "param"}, {param_copy, "param_copy"}});
    require_same_device(op, {{param, "param"}, {param_copy, "param_copy"}});
  }
  require_range(op, "lr", p.lr, std::isfinite(p.lr) && p.lr >= 0, "a finite number >= 0");
  require_range(op, "beta1", p.beta1, p.beta1 >= 0 && p.beta1 < 1, "[0, 1)");
  require_range(op, "beta2", p.beta2, p.beta2 >= 0 && p.beta2 < 1, "[0, 1)");
  require_range(op, "eps", p.eps, std::isfinite(p.eps) && p.eps > 0, "a finite number > 0");
  require_range(op, "weight_decay", p.weight_decay, std::isfinite(p.weight_decay) && p.weight_decay >= 0,
                "a finite number >= 0");
  require_range(op, "grad_scale", p.grad_scale, std::isfinite(p.grad_scale) && p.grad_scale >= 0,
                "a finite number >= 0");
  DT_CHECK(p.step >= 1, std::string(op) + ": step is " + std::to_string(p.step) + "; accepted: >= 1 (1-based)");
  DT_BACKEND(param, adamw_update)(param, grad, m, v, p, param_copy);
}

}  // namespace dt::kernels
