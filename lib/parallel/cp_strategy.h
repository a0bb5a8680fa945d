// Context parallelism as a Strategy (parallel/strategy.h): the cp ranks of a replica share
// its rows of the batch and each trains its two chunks of every sequence (rank r: chunks r
// and 2 cp - 1 - r of 2 cp, nn/ring_attention.h); the model's attention runs round the cp
// ring. What it adds to a step: the token selection, the loss summed over cp (each rank's
// targets are a disjoint part of the batch's) and the check that a sequence splits into 2 cp
// chunks. The gradients are summed over dp x cp by the data-parallel strategy (DDP or ZeRO
// over that group, parallel/axis_strategies.cc): every rank's are shares of one batch.
#pragma once
#include "parallel/strategy.h"

namespace dt::parallel {

class CpStrategy final : public Strategy {
 public:
  // cp: this rank's communicator over the cp axis; device: where exact_sum's buffers live.
  CpStrategy(comm::Communicator& cp, Device device) : cp_(cp), device_(device) {}
  std::string name() const override { return "cp"; }
  void check_micro_batch(const std::string& what, int64_t B, int64_t T) const override;
  void select_tokens(Tensor& inputs, Tensor& targets) const override;
  void sum_loss(double* x, size_t n) override { exact_sum(cp_, x, n, device_); }

 private:
  comm::Communicator& cp_;
  Device device_;
};

}  // namespace dt::parallel
