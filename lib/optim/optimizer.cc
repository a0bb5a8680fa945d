#include "optim/optimizer.h"

#include <cmath>
#include <exception>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/tensor_copy.h"
#include "kernels/ops.h"

namespace dt::optim {

Optimizer::Optimizer(nn::ParamList params, float lr, const char* kind, bool offload)
    : params_(std::move(params)), lr_(lr) {
  set_lr(lr);
  for (const nn::Parameter* p : params_)
    offload_ = offload_ || (offload && p && p->value.defined() && p->value.device().type != DeviceType::CPU);
  std::set<std::string> names;
  for (size_t i = 0; i < params_.size(); ++i) {
    const nn::Parameter* p = params_[i];
    std::string where = std::string(kind) + ": parameter " + std::to_string(i);
    DT_CHECK(p != nullptr, where + " is null; accepted: a Parameter*");
    where += " (\"" + p->name + "\")";
    DT_CHECK(!p->name.empty(), where + " has an empty name; checkpoints key state on names");
    DT_CHECK(names.insert(p->name).second, where + ": the name appears twice; names must be unique");
    DT_CHECK(p->value.defined() && is_floating(p->value.dtype()),
             where + ": value must be a defined f32, bf16 or f16 tensor");
    DT_CHECK(p->grad.defined() && p->grad.shape() == p->value.shape() && is_floating(p->grad.dtype()),
             where + ": grad must be a floating tensor shaped " + shape_str(p->value.shape()));
  }
  make_masters();
  step_ = Tensor::zeros({1}, DType::I64, Device::cpu(), MemTag::Optimizer);
  named_.emplace_back("optimizer.step", step_);
}

void Optimizer::make_masters() {
  for (size_t i = 0; i < params_.size(); ++i) {
    const nn::Parameter* p = params_[i];
    if (offload_) {  // a host master (f32 or not), and a host buffer the value comes back through
      Tensor host_value = to_device(p->value, Device::cpu());
      Tensor m = Tensor::zeros(p->value.shape(), DType::F32, Device::cpu(), MemTag::Optimizer);
      kernels::cast(host_value, m);
      masters_.push_back(m);
      copies_.push_back(Tensor::zeros(p->value.shape(), p->value.dtype(), Device::cpu(), MemTag::Optimizer));
      host_grads_.push_back(Tensor::zeros(p->grad.shape(), p->grad.dtype(), Device::cpu(), MemTag::Grad));
      if (p->value.dtype() != DType::F32) named_.emplace_back(p->name + ".master", m);
    } else if (p->value.dtype() == DType::F32) {
      masters_.push_back(p->value);  // its own master: the kernel updates it in place
      copies_.emplace_back();
    } else {
      Tensor m = Tensor::zeros(p->value.shape(), DType::F32, p->value.device(), MemTag::Optimizer);
      kernels::cast(p->value, m);
      masters_.push_back(m);
      copies_.push_back(p->value);
      named_.emplace_back(p->name + ".master", m);
    }
  }
}

void Optimizer::set_lr(float lr) {
  DT_CHECK(std::isfinite(lr) && lr >= 0, "optimizer: lr is " + std::to_string(lr) + "; accepted: a finite number >= 0");
  lr_ = lr;
}

int64_t Optimizer::steps() const { return step_.data<int64_t>()[0]; }

Tensor Optimizer::add_state(size_t i, const std::string& suffix) {
  const Tensor& v = params_[i]->value;
  Tensor t = Tensor::zeros(v.shape(), DType::F32, offload_ ? Device::cpu() : v.device(), MemTag::Optimizer);
  named_.emplace_back(params_[i]->name + "." + suffix, t);
  return t;
}

void Optimizer::check_live(const char* what) const {
  DT_CHECK(!released_, std::string("optimizer ") + what +
                           ": its state was released to the engine's own optimizers (ZeRO's shards, or the tp/pp parts'), "
                           "which the engine steps now");
}

void Optimizer::release_state() {
  masters_.clear();
  copies_.clear();
  host_grads_.clear();
  named_.clear();
  named_.emplace_back("optimizer.step", step_);
  drop_state();
  released_ = true;
}

void Optimizer::reinstate_state() {
  if (!released_) return;
  named_.clear();
  make_masters();  // the masters from the values, as at construction
  named_.emplace_back("optimizer.step", step_);
  make_state();
  released_ = false;
}

void Optimizer::step(float grad_scale) {
  check_live("step");
  DT_CHECK(std::isfinite(grad_scale) && grad_scale >= 0,
           "optimizer step: grad_scale is " + std::to_string(grad_scale) + "; accepted: a finite number >= 0");
  int64_t next = steps() + 1;
  if (offload_) {
    step_offloaded(grad_scale, next);
  } else {
    for (size_t i = 0; i < params_.size(); ++i) update(i, grad_scale, next);
  }
  // Counted only after every parameter was updated, so a failed step is not counted.
  step_.data<int64_t>()[0] = next;
}

// Parameter i's gradient comes to the host on a helper thread while the CPU updates
// parameter i - 1; each updated value goes back to the GPU once computed.
void Optimizer::step_offloaded(float grad_scale, int64_t next) {
  const size_t n = params_.size();
  if (n == 0) return;
  copy_tensor(params_[0]->grad, host_grads_[0]);
  for (size_t i = 0; i < n; ++i) {
    std::exception_ptr fetch_error;
    std::thread fetch;
    if (i + 1 < n)
      fetch = std::thread([&, i] {
        try {
          copy_tensor(params_[i + 1]->grad, host_grads_[i + 1]);
        } catch (...) {
          fetch_error = std::current_exception();
        }
      });
    try {
      update(i, grad_scale, next);  // CPU kernels on the host state
      copy_tensor(copies_[i], params_[i]->value);
    } catch (...) {
      if (fetch.joinable()) fetch.join();
      throw;
    }
    if (fetch.joinable()) fetch.join();
    if (fetch_error) std::rethrow_exception(fetch_error);
  }
}

void Optimizer::after_load() {
  if (!offload_ || released_) return;
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i]->value.dtype() == DType::F32) copy_tensor(params_[i]->value, masters_[i]);
}

void Optimizer::zero_grad() {
  check_live("zero_grad");
  for (nn::Parameter* p : params_) kernels::fill(p->grad, 0.0f);
}

NamedTensors Optimizer::state() const { return named_; }

void Optimizer::sync_masters_from_params(const std::set<std::string>* only) {
  check_live("sync_masters_from_params");
  for (size_t i = 0; i < params_.size(); ++i) {
    if (only && !only->count(params_[i]->name)) continue;
    if (copies_[i].defined()) kernels::cast(to_device(params_[i]->value, masters_[i].device()), masters_[i]);
    else if (offload_ && params_[i]->value.dtype() == DType::F32) copy_tensor(params_[i]->value, masters_[i]);
  }
}

// ---- SGD ---------------------------------------------------------------------------------
Sgd::Sgd(nn::ParamList params, const SgdOptions& opt)
    : Optimizer(std::move(params), opt.lr, "Sgd", opt.offload), opt_(opt) {
  DT_CHECK(!opt.nesterov || (opt.momentum > 0 && opt.dampening == 0),
           "Sgd: nesterov requires momentum > 0 and dampening 0");
  make_state();
}

void Sgd::make_state() {
  for (size_t i = 0; i < params().size(); ++i)
    bufs_.push_back(opt_.momentum != 0 ? add_state(i, "momentum_buffer") : Tensor());
}

std::unique_ptr<Optimizer> Sgd::clone_over(nn::ParamList params) const {
  SgdOptions o = opt_;
  o.lr = lr();
  return std::make_unique<Sgd>(std::move(params), o);
}

void Sgd::update(size_t i, float grad_scale, int64_t step) {
  kernels::SgdParams p;
  p.lr = lr(), p.momentum = opt_.momentum, p.weight_decay = opt_.weight_decay, p.nesterov = opt_.nesterov;
  // PyTorch seeds the buffer with the first gradient, undamped: with a zeroed buffer that
  // is exactly dampening 0 on step 1 (see kernels/cpu/sgd_update.cc).
  p.dampening = step == 1 ? 0.0f : opt_.dampening;
  p.grad_scale = grad_scale;
  kernels::sgd_update(master(i), grad(i), bufs_[i], p, value_copy(i));
}

// ---- AdamW -------------------------------------------------------------------------------
AdamW::AdamW(nn::ParamList params, const AdamWOptions& opt)
    : Optimizer(std::move(params), opt.lr, "AdamW", opt.offload), opt_(opt) {
  make_state();
}

void AdamW::make_state() {
  for (size_t i = 0; i < params().size(); ++i) {
    m_.push_back(add_state(i, "exp_avg"));
    v_.push_back(add_state(i, "exp_avg_sq"));
  }
}

std::unique_ptr<Optimizer> AdamW::clone_over(nn::ParamList params) const {
  AdamWOptions o = opt_;
  o.lr = lr();
  return std::make_unique<AdamW>(std::move(params), o);
}

void AdamW::update(size_t i, float grad_scale, int64_t step) {
  kernels::AdamWParams p;
  p.lr = lr(), p.beta1 = opt_.beta1, p.beta2 = opt_.beta2, p.eps = opt_.eps, p.weight_decay = opt_.weight_decay;
  p.step = step, p.grad_scale = grad_scale;
  kernels::adamw_update(master(i), grad(i), m_[i], v_[i], p, value_copy(i));
}

}  // namespace dt::optim
