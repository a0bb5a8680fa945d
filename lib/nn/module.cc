#include "nn/module.h"

#include "core/device_scope.h"

#include "core/error.h"
#include "core/tensor_copy.h"
#include "core/random_fill.h"
#include "kernels/ops.h"

namespace dt::nn {

ParamList Module::parameters() {
  ParamList out;
  collect(out);
  return out;
}

int64_t Module::num_parameters() {
  int64_t n = 0;
  for (Parameter* p : parameters()) n += p->numel();
  return n;
}

void Module::zero_grad() {
  for (Parameter* p : parameters()) kernels::fill(p->grad, 0.0f);
}

namespace {
thread_local bool t_skip_init = false;  // ScopedSkipParamInit
}  // namespace

ScopedSkipParamInit::ScopedSkipParamInit() : previous_(t_skip_init) { t_skip_init = true; }
ScopedSkipParamInit::~ScopedSkipParamInit() { t_skip_init = previous_; }

Parameter make_param(const std::string& name, const Shape& shape, Parameter::Init init, float std, uint64_t seed,
                     DType dtype) {
  DT_CHECK(is_floating(dtype), "make_param(\"" + name + "\"): dtype " + dtype_name(dtype) +
                                   "; accepted: f32, bf16, f16");
  Parameter p;
  p.name = name;
  p.init = init;
  p.init_std = std;
  p.shape = shape;
  p.grad = Tensor::zeros(shape, dtype, current_device(), MemTag::Grad);
  if (t_skip_init) {
    p.value = Tensor::uninit(shape, dtype, current_device(), MemTag::Param);
    return p;
  }
  p.value = Tensor::zeros(shape, dtype, current_device(), MemTag::Param);
  if (init == Parameter::Init::Ones) kernels::fill(p.value, 1.0f);
  // Offset 0: the whole tensor. A shard re-creates its slice with its own global offset.
  // fill_random draws in f32 and rounds each value into the tensor's dtype.
  if (init == Parameter::Init::Normal) fill_random(p.value, Distribution::Normal, seed, name, 0, 0.0f, std);
  return p;
}

Device device_of(Module& m) {
  ParamList ps = m.parameters();
  return ps.empty() ? Device::cpu() : ps.front()->value.device();
}

Tensor& ensure(Tensor& t, const Shape& shape, DType dtype) {
  if (!t.defined() || t.shape() != shape || t.dtype() != dtype || t.device() != current_device())
    t = Tensor::uninit(shape, dtype, current_device(), MemTag::Activation);
  return t;
}

void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  kernels::matmul(x, w, y, /*trans_a=*/false, /*trans_b=*/true);
  if (b.defined()) kernels::bias_add(y, b);
}

namespace {
thread_local WeightGradQueue* t_deferred = nullptr;  // ScopedDeferWeightGrads
}  // namespace

void WeightGradQueue::run() {
  for (auto& fn : fns_) fn();
  fns_.clear();
}

ScopedDeferWeightGrads::ScopedDeferWeightGrads(WeightGradQueue* queue) : previous_(t_deferred) { t_deferred = queue; }
ScopedDeferWeightGrads::~ScopedDeferWeightGrads() { t_deferred = previous_; }

void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, bool accumulate_dx,
                     Tensor& dw, Tensor& db) {
  if (dx.defined()) kernels::matmul(dy, w, dx, false, false, 1.0f, accumulate_dx ? 1.0f : 0.0f);
  auto weight_grads = [](const Tensor& g, const Tensor& in, Tensor& gw, Tensor& gb) {
    kernels::matmul(g, in, gw, /*trans_a=*/true, false, 1.0f, /*beta=*/1.0f);  // dw += dy^T x
    if (gb.defined()) kernels::bias_backward(g, gb);
  };
  if (!t_deferred) return weight_grads(dy, x, dw, db);
  auto copy = [](const Tensor& t) {
    Tensor c = Tensor::uninit(t.shape(), t.dtype(), t.device(), MemTag::Activation);
    copy_tensor(t, c);
    return c;
  };
  t_deferred->push([weight_grads, g = copy(dy), in = copy(x), gw = dw, gb = db]() mutable { weight_grads(g, in, gw, gb); });
}

}  // namespace dt::nn
