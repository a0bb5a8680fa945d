#include "parallel/ep_strategy.h"

#include "kernels/ops.h"

namespace dt::parallel {
namespace {

// units with only the parameters `keep` says yes to (the unit structure stays, for hooks).
ModelUnits filtered(const ModelUnits& units, bool experts) {
  ModelUnits out;
  out.names = units.names;
  for (const nn::ParamList& ps : units.params) {
    out.params.emplace_back();
    for (nn::Parameter* p : ps)
      if (is_expert_param(p->name) == experts) out.params.back().push_back(p);
  }
  return out;
}

}  // namespace

bool is_expert_param(const std::string& name) { return name.find(".moe.experts.") != std::string::npos; }

EpStrategy::EpStrategy(const ModelUnits& units, comm::Communicator& batch, comm::Communicator* dp,
                       comm::Communicator& experts, comm::Communicator* pp, int64_t bucket_bytes, Device device)
    : batch_(batch), experts_group_(experts), pp_(pp), device_(device) {
  shared_ = std::make_unique<DdpStrategy>(filtered(units, false), batch, bucket_bytes);
  if (dp) experts_ = std::make_unique<DdpStrategy>(filtered(units, true), *dp, bucket_bytes);
  for (const nn::ParamList& ps : units.params)
    for (nn::Parameter* p : ps)
      if (is_expert_param(p->name)) expert_params_.push_back(p);
}

EpStrategy::EpStrategy(const ModelUnits& units, comm::Communicator& batch, comm::Communicator& dp,
                       comm::Communicator& ep, comm::Communicator& all_experts, int stage,
                       const optim::Optimizer& prototype, Device device)
    : batch_(batch), experts_group_(all_experts), ep_(&ep), device_(device) {
  zero_ = std::make_unique<ZeroStrategy>(units, dp, stage, prototype);
  zero_->split_rows_over(nullptr);  // the rows split over dp x ep: this strategy's batch group
  shared_by_unit_ = filtered(units, false).params;
}

void EpStrategy::sum_shared_over_ep(int unit) {
  all_reduce_grads(*ep_, shared_by_unit_.at(static_cast<size_t>(unit)), flat_, device_);
}

void EpStrategy::after_backward(int unit, Part part, bool last) {
  if (zero_) {  // the shared sums over ep first, then ZeRO's over dp (the same condition as its own)
    if (grads_final(part) && (last || zero_->sharding().stage() >= 2)) sum_shared_over_ep(unit);
    return zero_->after_backward(unit, part, last);
  }
  shared_->after_backward(unit, part, last);
  if (experts_) experts_->after_backward(unit, part, last);
}

void EpStrategy::finish_grads() {
  if (zero_) return zero_->finish_grads();
  shared_->finish_grads();
  if (experts_) experts_->finish_grads();
}

bool EpStrategy::local_squared_norm(SquaredNorm& sq) const {
  if (!zero_) return false;
  const std::function<bool(const nn::Parameter&)> expert = [](const nn::Parameter& p) {
    return is_expert_param(p.name);
  };
  zero_->sharding().squared_grad_norm(sq.split, sq.replicated, &expert, &experts_sq_);
  return true;
}

void EpStrategy::sum_squared_norm(SquaredNorm& sq) {
  if (zero_) {
    // The pipeline (attached first) summed the shared shards' parts over pp; over dp here,
    // as ZeRO does. Each expert's shard is one rank's of dp x pp x ep.
    zero_->sum_squared_norm(sq);
    sq.replicated += exact_sum(experts_group_, experts_sq_, device_);
    return;
  }
  // The engine counted this rank's experts with the replicated parameters, and the pipeline
  // (attached first) summed those over its stages; every expert of the replica is one rank's
  // of the pp x ep group, so: add all of them, less what the pipeline's sum already holds.
  double mine = 0;
  for (const nn::Parameter* p : expert_params_) mine += kernels::sum_squares(p->grad);
  const double counted = pp_ ? exact_sum(*pp_, mine, device_) : mine;
  sq.replicated += exact_sum(experts_group_, mine, device_) - counted;
}

}  // namespace dt::parallel
