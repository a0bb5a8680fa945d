// Optimizers over a ParamList: SGD (PyTorch semantics) and AdamW (decoupled weight decay,
// bias correction), both thin drivers of kernels::sgd_update / kernels::adamw_update.
//
// Mixed precision (DESIGN §4): when a parameter's value is bf16 or f16, the optimizer keeps
// an f32 master copy and the kernel writes the rounded result back into the value through
// its param_copy argument, so small updates are not lost to bf16 rounding. An f32 value is
// its own master (no copy, no extra memory). All state is f32 and tagged MemTag::Optimizer,
// so the ledger shows K = 12 bytes/param for bf16 AdamW, as in the ZeRO paper.
//
// state() names every state tensor for checkpoints: "<param>.master" (mixed precision only),
// "<param>.exp_avg", "<param>.exp_avg_sq" (AdamW), "<param>.momentum_buffer" (SGD with
// momentum), and "optimizer.step" (i64 [1], updates taken). The tensors share storage with
// the optimizer, so loading a checkpoint into them restores the optimizer in place.
//
// Offload (ZeRO-Offload; the option `offload`): for parameters on a GPU, the f32 masters
// and every moment live in host memory and the CPU kernels update them; each step copies
// the gradients to the host and the updated values back. The GPU then holds only values and
// gradients (the ledger of cuda:N shows no optimizer bytes). Gradients of parameter i + 1
// come over while the CPU updates parameter i. A CPU model is unaffected.
//
// The optimizer holds the parameters' value tensors it was built with (views of the same
// storage): write new values into them (or call sync_masters_from_params), never assign a
// new Tensor to Parameter::value after construction.
#pragma once
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "nn/parameter.h"

namespace dt::optim {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter from its gradient. grad_scale multiplies every gradient
  // first (1 / loss scale, a clipping coefficient, 1 / accumulation steps), which the
  // kernels fold into the update instead of a separate pass over the grads.
  void step(float grad_scale = 1.0f);
  // Zeroes every gradient (backward accumulates with +=).
  void zero_grad();

  float lr() const { return lr_; }
  void set_lr(float lr);
  int64_t steps() const;  // updates taken so far
  const nn::ParamList& params() const { return params_; }

  NamedTensors state() const;
  // A fresh optimizer of the same kind and hyper-parameters (lr included) over `params`
  // (another replica's parameters, in the same order), with zeroed state: what a
  // data-parallel engine gives every replica.
  virtual std::unique_ptr<Optimizer> clone_over(nn::ParamList params) const = 0;
  // Re-reads the masters from the parameter values, for when values were loaded (or
  // initialized, or written through a view) after the optimizer was built and no master
  // was saved: every parameter's, or only those named in `only`.
  void sync_masters_from_params(const std::set<std::string>* only = nullptr);
  // Frees every state tensor but the step counter and lets go of the parameters' values:
  // what ZeRO does to the host's optimizer once a sharded one (clone_over the shards, its
  // state copied in) has taken over, and a tp/pp engine once its parts' optimizers have
  // their slices. step, zero_grad and sync_masters_from_params then fail
  // with an error that says so; steps() and state() (the counter alone) still answer.
  void release_state();
  // The reverse: zeroed state again (the masters re-read from the values), for a caller that
  // is about to fill it (a split engine gathering its parts' state into the host's). No-op
  // when not released.
  void reinstate_state();
  bool released() const { return released_; }
  bool offloaded() const { return offload_; }
  // After state was loaded from a checkpoint: re-derives what checkpoints do not carry (the
  // host masters of offloaded f32 parameters, which equal their values).
  void after_load();

 protected:
  Optimizer(nn::ParamList params, float lr, const char* kind, bool offload = false);
  // A zeroed f32 state tensor shaped as parameter i, named "<param>.<suffix>".
  Tensor add_state(size_t i, const std::string& suffix);
  // The f32 tensor the kernel updates, and the low-precision value it writes (undefined
  // when the value is f32 and is its own master).
  Tensor& master(size_t i) { return masters_[i]; }
  Tensor& value_copy(size_t i) { return copies_[i]; }
  // The gradient the kernel reads: the parameter's, or its host copy when offloaded.
  const Tensor& grad(size_t i) const { return offload_ ? host_grads_[i] : params_[i]->grad; }
  virtual void update(size_t i, float grad_scale, int64_t step) = 0;
  virtual void drop_state() = 0;  // the subclass's part of release_state
  virtual void make_state() = 0;  // its zeroed state, named after the masters and the counter

 private:
  void check_live(const char* what) const;
  void make_masters();  // each parameter's f32 master (or the value itself) and offload buffers
  void step_offloaded(float grad_scale, int64_t next);
  nn::ParamList params_;
  float lr_;
  std::vector<Tensor> masters_, copies_;
  bool offload_ = false;
  std::vector<Tensor> host_grads_;  // offload: where each step's gradients come to the host
  Tensor step_;  // i64 [1], a tensor so that checkpoints carry it like any other state
  NamedTensors named_;
  bool released_ = false;
};

struct SgdOptions {
  float lr = 1e-2f, momentum = 0.0f, dampening = 0.0f, weight_decay = 0.0f;
  bool nesterov = false;
  bool offload = false;  // state on the host for a GPU model (see above)
};

class Sgd final : public Optimizer {
 public:
  Sgd(nn::ParamList params, const SgdOptions& opt);
  std::unique_ptr<Optimizer> clone_over(nn::ParamList params) const override;

 private:
  void update(size_t i, float grad_scale, int64_t step) override;
  void drop_state() override { bufs_.clear(); }
  void make_state() override;
  SgdOptions opt_;
  std::vector<Tensor> bufs_;
};

struct AdamWOptions {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.01f;
  bool offload = false;  // state on the host for a GPU model (see above)
};

class AdamW final : public Optimizer {
 public:
  AdamW(nn::ParamList params, const AdamWOptions& opt);
  std::unique_ptr<Optimizer> clone_over(nn::ParamList params) const override;

 private:
  void update(size_t i, float grad_scale, int64_t step) override;
  void drop_state() override {
    m_.clear();
    v_.clear();
  }
  void make_state() override;
  AdamWOptions opt_;
  std::vector<Tensor> m_, v_;
};

}  // namespace dt::optim
