// Tensor parallelism as a Strategy (parallel/strategy.h), over the tp axis. The model's
// blocks are built split over tp (nn::GPT with a TpGroup, nn/tensor_parallel.h), so forward
// and backward carry their own all-reduces and the step needs nothing around the units.
// What the step must know is the gradient norm: each rank holds parts of the split
// parameters and a whole copy of the replicated ones (norms, embeddings, head), whose
// gradients are equal on every tp rank; the global squared norm sums the split parts over
// tp and counts the replicated ones once, so clipping matches the single-rank model.
#pragma once
#include "parallel/strategy.h"

namespace dt::parallel {

class TpStrategy final : public Strategy {
 public:
  // tp: this rank's communicator over the tp axis; device: the model's.
  TpStrategy(comm::Communicator& tp, Device device) : tp_(tp), device_(device) {}
  std::string name() const override { return "tp"; }
  void sum_squared_norm(const nn::ParamList& params, double& sq) override;

 private:
  comm::Communicator& tp_;
  Device device_;
};

}  // namespace dt::parallel
