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

void EpStrategy::after_backward(int unit, Part part, bool last) {
  shared_->after_backward(unit, part, last);
  if (experts_) experts_->after_backward(unit, part, last);
}

void EpStrategy::finish_grads() {
  shared_->finish_grads();
  if (experts_) experts_->finish_grads();
}

void EpStrategy::sum_squared_norm(SquaredNorm& sq) {
  // The engine counted this rank's experts with the replicated parameters, and the pipeline
  // (attached first) summed those over its stages; every expert of the replica is one rank's
  // of the pp x ep group, so: add all of them, less what the pipeline's sum already holds.
  double mine = 0;
  for (const nn::Parameter* p : expert_params_) mine += kernels::sum_squares(p->grad);
  const double counted = pp_ ? exact_sum(*pp_, mine, device_) : mine;
  sq.replicated += exact_sum(experts_group_, mine, device_) - counted;
}

}  // namespace dt::parallel
