// The nn layer's base: a Module owns Parameters and lists them in a stable order. There is
// no autograd: every module type has an explicit forward that fills a saved-activation
// struct (its Acts) and a backward that reads it. Acts are owned by the caller, one per
// micro-batch in flight, so pipeline schedules can keep several; their buffers are
// MemTag::Activation and are reused when the next step has the same shape.
//
// Conventions shared by every module:
//  - Linear weights are [out, in] (y = x W^T + b), as in PyTorch: a tied LM head is then
//    the token table itself, and tensor parallelism splits dim 0 (column parallel) or dim 1
//    (row parallel) of the same layout.
//  - Parameters and activations live on the thread's current device (core/device_scope.h:
//    the CPU, or the GPU a model was created on); math goes through kernels/ops.h. A module's parameters
//    have one storage dtype (f32, bf16 or f16, chosen at construction) and its activations
//    and gradients take the dtype of its input, which must match (the kernels need one
//    storage type per call); statistics saved for backward (mean, rstd, lse) stay f32.
//  - backward overwrites its dx output and ACCUMULATES (+=) into every Parameter's grad, so
//    gradient accumulation over micro-batches needs nothing extra; call zero_grad() between
//    optimizer steps.
#pragma once
#include <functional>
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "nn/parameter.h"

namespace dt::nn {

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  // Parameters hold pointers into the module: no copies or moves after construction.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Appends this module's parameters, children in declaration order.
  virtual void collect(ParamList& out) = 0;
  ParamList parameters();
  int64_t num_parameters();
  void zero_grad();
};

// A parameter `name` of `shape` and floating `dtype`: value (MemTag::Param) initialized from
// the counter-based RNG keyed by (seed, name, global index), grad (MemTag::Grad, same dtype)
// zeroed. Values are drawn in f32 and rounded once, so a bf16 parameter is the f32 one rounded.
Parameter make_param(const std::string& name, const Shape& shape, Parameter::Init init, float std, uint64_t seed,
                     DType dtype = DType::F32);

// While one is alive on this thread, make_param leaves values uninitialized: for a caller
// that overwrites every parameter next (loading a checkpoint or Hugging Face weights, which
// fail on any missing tensor). Drawing 134M normal values took longer than reading the file.
class ScopedSkipParamInit {
 public:
  ScopedSkipParamInit();
  ~ScopedSkipParamInit();
  ScopedSkipParamInit(const ScopedSkipParamInit&) = delete;
  ScopedSkipParamInit& operator=(const ScopedSkipParamInit&) = delete;

 private:
  bool previous_;
};

// The device of m's parameters (the CPU for a module without any).
Device device_of(Module& m);

// Makes t an activation buffer of `shape` on the current device (core/device_scope.h),
// keeping the old one when shape, dtype and device match.
Tensor& ensure(Tensor& t, const Shape& shape, DType dtype = DType::F32);

// [rows, cols] view of a tensor whose last dim is cols.
inline Tensor flat2d(const Tensor& t) { return t.reshape({t.rows(), t.cols()}); }
// Rows [b, e) of t, or t itself when undefined (an optional bias).
inline Tensor rows_of(const Tensor& t, int64_t b, int64_t e) { return t.defined() ? t.slice0(b, e) : t; }

// y = x W^T (+ b). x: [R, in], w: [out, in], b: [out] or undefined, y: [R, out] (written).
void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y);
// dx (= or += when accumulate_dx) dy W; dw += dy^T x; db += sum_r dy (when b is defined).
// dx may be undefined (not needed, e.g. the first layer of an MLP).
void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, bool accumulate_dx,
                     Tensor& dw, Tensor& db);

// A split backward (a zero-bubble pipeline, parallel/pipeline_schedule.h's ZB-H1): while a
// ScopedDeferWeightGrads is alive on this thread, linear_backward computes dx only and
// queues its weight and bias gradients here, with copies of the dy and x they read (the
// layers' scratch is reused before the queue runs); run() then computes them, in order,
// into the same gradients. The ops are the ones an undivided backward runs, so the
// gradients are bitwise the same. Everything else (norm and embedding gradients) stays
// in the input-gradient pass.
class WeightGradQueue {
 public:
  void push(std::function<void()> fn) { fns_.push_back(std::move(fn)); }
  void run();
  bool empty() const { return fns_.empty(); }

 private:
  std::vector<std::function<void()>> fns_;
};
class ScopedDeferWeightGrads {
 public:
  explicit ScopedDeferWeightGrads(WeightGradQueue* queue);
  ~ScopedDeferWeightGrads();
  ScopedDeferWeightGrads(const ScopedDeferWeightGrads&) = delete;
  ScopedDeferWeightGrads& operator=(const ScopedDeferWeightGrads&) = delete;

 private:
  WeightGradQueue* previous_;
};

}  // namespace dt::nn
