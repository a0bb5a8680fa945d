// Expert parallelism's training side, as a Strategy (parallel/strategy.h) over the dp and ep
// axes. The layout (parallel/layout.h) gives each ep rank a share of every block's experts
// and the rest of the model whole; the mixture of experts carries tokens to their experts'
// ranks and back (nn/expert_exchange.h). Every dp x ep rank trains its own slice of the
// batch (so ep ranks are also data-parallel ranks: Megatron's layout), and gradients are
// summed over the ranks that share a parameter:
//   - a parameter every rank holds (attention, norms, routers, embeddings, head): over
//     dp x ep;
//   - an expert's, held by one ep rank of each replica: over dp only (Megatron's expert-
//     data-parallel group);
// each by DDP's buckets (parallel/ddp_strategy.h), overlapped with backward. The squared
// gradient norm adds the other ep ranks' experts. This strategy takes the dp axis's place
// when ep > 1 (parallel/axis_strategies.cc); ZeRO over ep layouts is not built yet.
#pragma once
#include <memory>

#include "parallel/ddp_strategy.h"
#include "parallel/strategy.h"

namespace dt::parallel {

class EpStrategy final : public Strategy {
 public:
  // batch: the dp x ep group; dp: the dp group, null for dp = 1; experts: the group whose
  // ranks hold all of one replica's experts (pp x ep), pp: the pp group (null for pp = 1).
  EpStrategy(const ModelUnits& units, comm::Communicator& batch, comm::Communicator* dp, comm::Communicator& experts,
             comm::Communicator* pp, int64_t bucket_bytes, Device device);
  std::string name() const override { return "ep"; }
  comm::Communicator* batch_group() override { return &batch_; }
  void after_backward(int unit, Part part, bool last) override;
  void finish_grads() override;
  void sum_squared_norm(SquaredNorm& sq) override;

 private:
  comm::Communicator& batch_;
  comm::Communicator& experts_group_;
  comm::Communicator* pp_;
  Device device_;
  std::unique_ptr<DdpStrategy> shared_, experts_;  // over dp x ep; over dp (null for dp = 1)
  nn::ParamList expert_params_;
};

// True for a parameter of a mixture of experts' experts ("blocks.<i>.moe.experts.<e>.*").
bool is_expert_param(const std::string& name);

}  // namespace dt::parallel
