// ZeRO stages 1 to 3 (FSDP) as a Strategy (parallel/strategy.h), over the dp axis: the
// sharding is parallel/zero.h's; this file decides when, in a step, each unit's values are
// gathered and freed and its gradients reduced, and keeps the sharded optimizer.
//
// Stage 3 prefetch: while a unit computes, the next unit in the step's order (strategy.h)
// is being gathered, so at most two units are whole at a time; unit 0 is gathered for the
// embedding and again for the head, whose backward follows at once.
#pragma once
#include <map>
#include <memory>

#include "parallel/strategy.h"
#include "parallel/zero.h"

namespace dt::parallel {

class ZeroStrategy final : public Strategy {
 public:
  // The engine's optimizer becomes prototype.clone_over(the shards), its state taken from
  // prototype's (which may have stepped, or been loaded). The parameters' current values
  // must be equal on every rank.
  ZeroStrategy(const ModelUnits& units, comm::Communicator& dp, int stage, const optim::Optimizer& prototype);
  std::string name() const override { return "zero" + std::to_string(zero_->stage()); }
  comm::Communicator* batch_group() override { return batch_; }
  // As DdpStrategy's: the rows' group when not the shards' (context parallelism).
  void split_rows_over(comm::Communicator* g) { batch_ = g; }
  optim::Optimizer* optimizer() override { return opt_.get(); }
  bool owns_grads() const override { return true; }
  bool local_squared_norm(SquaredNorm& sq) const override;
  void sum_squared_norm(SquaredNorm& sq) override;

  void begin_step() override { zero_->begin_step(); }
  void before_forward(int unit, Part part) override;
  void after_forward(int unit, Part part) override;
  void end_forward_only() override {
    if (sharded(0) >= 0) zero_->release_values(sharded(0));
  }
  void before_backward(int unit, Part part) override;
  void after_backward(int unit, Part part, bool last) override;
  void finish_grads() override { zero_->finish_grads(); }  // this rank's shard of the sums
  void after_update() override { zero_->after_step(); }

  void gather_model() override { zero_->gather_all(); }

  bool shards_state() const override { return true; }
  std::vector<nn::StateTensor> whole_state(optim::Optimizer& opt) override;
  std::vector<nn::StateTensor> load_targets(optim::Optimizer& opt) override;
  void finish_load(optim::Optimizer& opt) override;
  std::vector<LocalPiece> local_state(optim::Optimizer& opt) override { return zero_->local_state(opt); }
  void finish_local_load(optim::Optimizer& opt) override { zero_->after_local_load(); }

  const ZeroSharding& sharding() const { return *zero_; }

 private:
  // The sharding's index of an engine unit, or -1: a pipeline's middle stage has no
  // parameters in unit 0 (no embedding, no head), which the sharding then does not hold.
  int sharded(int unit) const { return unit - skip_; }
  comm::Communicator& dp_;
  comm::Communicator* batch_ = &dp_;
  int skip_ = 0;   // 1 when unit 0 is empty
  Device device_;  // the model's
  int num_blocks_;
  std::unique_ptr<ZeroSharding> zero_;
  std::unique_ptr<optim::Optimizer> opt_;
  std::vector<std::pair<std::string, Tensor>> load_buffers_;  // load_targets to finish_load
};

}  // namespace dt::parallel
