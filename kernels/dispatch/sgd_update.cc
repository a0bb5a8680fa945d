// sgd_update: validation and dispatch, with PyTorch's rules for the hyper-parameters.
#include <cmath>

#include "kernels/check.h"

namespace dt::kernels {
namespace {

void require_range(const char* op, const char* name, double x, bool ok, const char* accepted) {
  DT_CHECK(ok && !std::isnan(x),
           std::string(op) + ": " + name + " is " + std::to_string(x) + "; accepted: " + accepted);
}

}  // namespace

void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdParams& p, Tensor& param_copy) {
  const char* op = "sgd_update";
  require_dtype(op, {param, "param"}, DType::F32);
  require_float(op, {grad, "grad"});
  require_same_shape(op, {{param, "param"}, {grad, "grad"}});
  require_same_device(op, {{param, "param"}, {grad, "grad"}});
  require_range(op, "lr", p.lr, std::isfinite(p.lr) && p.lr >= 0, "a finite number >= 0");
  require_range(op, "momentum", p.momentum, std::isfinite(p.momentum) && p.momentum >= 0, "a finite number >= 0");
  require_range(op, "dampening", p.dampening, p.dampening >= 0 && p.dampening <= 1, "[0, 1]");
  require_range(op, "weight_decay", p.weight_decay, std::isfinite(p.weight_decay) && p.weight_decay >= 0,
                "a finite number >= 0");
  require_range(op, "grad_scale", p.grad_scale, std::isfinite(p.grad_scale) && p.grad_scale >= 0,
                "a finite number >= 0");
  DT_CHECK(!p.nesterov || (p.momentum > 0 && p.dampening == 0),
           std::string(op) + ": nesterov is set with momentum " + std::to_string(p.momentum) + " and dampening " +
               std::to_string(p.dampening) + "; nesterov requires momentum > 0 and dampening 0");
  if (p.momentum != 0) {
    DT_CHECK(momentum_buf.defined(), std::string(op) + ": momentum_buf is an empty tensor; required when momentum is " +
                                         std::to_string(p.momentum) + " (!= 0): an f32 tensor shaped as param");
    require_dtype(op, {momentum_buf, "momentum_buf"}, DType::F32);
    require_same_shape(op, {{param, "param"}, {momentum_buf, "momentum_buf"}});
    require_same_device(op, {{param, "param"}, {momentum_buf, "momentum_buf"}});
  }
  if (param_copy.defined()) {
    require_float(op, {param_copy, "param_copy"});
    require_same_shape(op, {{param, "param"}, {param_copy, "param_copy"}});
    require_same_device(op, {{param, "param"}, {param_copy, "param_copy"}});
  }
  DT_BACKEND(param, sgd_update)(param, grad, momentum_buf, p, param_copy);
}

}  // namespace dt::kernels
