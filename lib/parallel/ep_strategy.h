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
// when ep > 1 (parallel/axis_strategies.cc).
//
// With ZeRO (stage 1, 2 or 3, dp > 1): one ZeRO sharding over dp holds every parameter of
// the rank (its experts among them) and the sharded optimizer; the shared parameters'
// gradients are first all-reduced over ep, unit by unit, when ZeRO is about to take them
// (stage 1: after the last micro-batch; 2 and 3: every micro-batch), so ZeRO's
// reduce-scatter over dp completes their sum over dp x ep while the experts' stay over dp.
// The shared state is then sharded over dp (replicated over ep), the experts' over dp on
// their ep rank. The squared norm: the shards' squares over dp, the experts' over dp x pp x ep.
#pragma once
#include <memory>

#include "parallel/ddp_strategy.h"
#include "parallel/strategy.h"
#include "parallel/zero_strategy.h"

namespace dt::parallel {

class EpStrategy final : public Strategy {
 public:
  // batch: the dp x ep group; dp: the dp group, null for dp = 1; experts: the group whose
  // ranks hold all of one replica's experts (pp x ep), pp: the pp group (null for pp = 1).
  EpStrategy(const ModelUnits& units, comm::Communicator& batch, comm::Communicator* dp, comm::Communicator& experts,
             comm::Communicator* pp, int64_t bucket_bytes, Device device);
  // With ZeRO at `stage` over dp (see above): ep, the ep group; all_experts, dp x pp x ep;
  // prototype: the optimizer ZeRO's shards clone.
  EpStrategy(const ModelUnits& units, comm::Communicator& batch, comm::Communicator& dp, comm::Communicator& ep,
             comm::Communicator& all_experts, int stage, const optim::Optimizer& prototype, Device device);
  std::string name() const override { return zero_ ? "ep+" + zero_->name() : "ep"; }
  comm::Communicator* batch_group() override { return &batch_; }
  void after_backward(int unit, Part part, bool last) override;
  void finish_grads() override;
  void sum_squared_norm(SquaredNorm& sq) override;
  // The rest is ZeRO's when it runs (forwarded), nothing otherwise.
  optim::Optimizer* optimizer() override { return zero_ ? zero_->optimizer() : nullptr; }
  bool owns_grads() const override { return zero_ != nullptr; }
  bool local_squared_norm(SquaredNorm& sq) const override;
  void begin_step() override { if (zero_) zero_->begin_step(); }
  void before_forward(int unit, Part part) override { if (zero_) zero_->before_forward(unit, part); }
  void after_forward(int unit, Part part) override { if (zero_) zero_->after_forward(unit, part); }
  void end_forward_only() override { if (zero_) zero_->end_forward_only(); }
  void before_backward(int unit, Part part) override { if (zero_) zero_->before_backward(unit, part); }
  void after_update() override { if (zero_) zero_->after_update(); }
  void gather_model() override { if (zero_) zero_->gather_model(); }
  bool shards_state() const override { return zero_ != nullptr; }
  std::vector<nn::StateTensor> whole_state(optim::Optimizer& opt) override { return zero_->whole_state(opt); }
  std::vector<nn::StateTensor> load_targets(optim::Optimizer& opt) override { return zero_->load_targets(opt); }
  void finish_load(optim::Optimizer& opt) override { zero_->finish_load(opt); }
  std::vector<LocalPiece> local_state(optim::Optimizer& opt) override { return zero_->local_state(opt); }
  void finish_local_load(optim::Optimizer& opt) override { zero_->finish_local_load(opt); }

 private:
  void sum_shared_over_ep(int unit);  // ZeRO: the unit's shared gradients all-reduced over ep
  comm::Communicator& batch_;
  comm::Communicator& experts_group_;
  comm::Communicator* pp_ = nullptr;
  comm::Communicator* ep_ = nullptr;
  Device device_;
  std::unique_ptr<DdpStrategy> shared_, experts_;  // over dp x ep; over dp (null for dp = 1)
  nn::ParamList expert_params_;
  std::unique_ptr<ZeroStrategy> zero_;
  std::vector<nn::ParamList> shared_by_unit_;  // ZeRO: each unit's parameters outside the experts
  Tensor flat_;                                // ZeRO: their gradients packed for the all-reduce
  mutable double experts_sq_ = 0.0;            // ZeRO: this rank's shard of the experts' squares
};

// True for a parameter of a mixture of experts' experts ("blocks.<i>.moe.experts.<e>.*").
bool is_expert_param(const std::string& name);

}  // namespace dt::parallel
