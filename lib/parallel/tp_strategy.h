// Tensor parallelism as a Strategy (parallel/strategy.h), over the tp axis. The model's
// blocks are built split over tp (nn::GPT with a TpGroup, nn/tensor_parallel.h), so forward
// and backward carry their own collectives and the step needs little around the units:
//  - Sequence parallel: the norms see this rank's tokens only, so their gradients
//    (Parameter::grad_partial_over_tp) are partial sums. When a unit's gradients are final
//    for the step (or for the micro-batch, when a data-parallel strategy reduces each
//    micro-batch's fresh gradients: ZeRO-2/3), they are summed over tp in one all-reduce
//    per unit, before that strategy, attached after this one, reads them (hooks run in
//    attach order).
//  - The gradient norm: each rank holds parts of the split parameters and a whole copy of
//    the replicated ones (norms, embeddings, head), whose gradients are equal on every tp
//    rank; the global squared norm sums the split parts over tp and counts the replicated
//    ones once, so clipping matches the single-rank model.
#pragma once
#include "parallel/strategy.h"

namespace dt::parallel {

class TpStrategy final : public Strategy {
 public:
  // tp: this rank's communicator over the tp axis; device: the model's; sequence_parallel:
  // the model was built with it (its micro-batches' tokens must split over tp);
  // fresh_grads_each_micro_batch: a strategy attached after this one zeroes the gradients
  // before each micro-batch's backward and takes them after it (ZeRO-2/3), so partial
  // gradients are summed every micro-batch rather than once, accumulated, per step.
  TpStrategy(const ModelUnits& units, comm::Communicator& tp, Device device, bool sequence_parallel,
             bool fresh_grads_each_micro_batch = false);
  std::string name() const override { return sequence_parallel_ ? "tp+sp" : "tp"; }
  void check_micro_batch(const std::string& what, int64_t B, int64_t T) const override;
  void after_backward(int unit, Part part, bool last) override;
  void sum_squared_norm(SquaredNorm& sq) override;
  double rows_share(const Tensor& targets, int32_t ignore_index) const override;
  void sum_over_split_tokens(double* x, size_t n) override {
    if (sequence_parallel_) exact_sum(tp_, x, n, device_);
  }

 private:
  comm::Communicator& tp_;
  Device device_;
  bool sequence_parallel_, fresh_grads_;
  std::vector<nn::ParamList> partial_;  // per unit: the parameters whose gradients sum over tp
  Tensor flat_;                         // their gradients packed for one all-reduce
};

}  // namespace dt::parallel
