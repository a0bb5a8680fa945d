#include "parallel/zero_strategy.h"

#include "core/error.h"

namespace dt::parallel {

ZeroStrategy::ZeroStrategy(const ModelUnits& units, comm::Communicator& dp, int stage,
                           const optim::Optimizer& prototype)
    : dp_(dp),
      skip_(units.params.at(0).empty() ? 1 : 0),
      device_(units.params.at(static_cast<size_t>(skip_)).at(0)->value.device()),
      num_blocks_(units.num_blocks()) {
  DT_CHECK(stage >= 1 && stage <= 3, "zero = " + std::to_string(stage) + "; accepted: 0 (DDP), 1, 2 or 3");
  zero_ = std::make_unique<ZeroSharding>(stage, std::vector<nn::ParamList>(units.params.begin() + skip_, units.params.end()),
                                         std::vector<std::string>(units.names.begin() + skip_, units.names.end()), dp);
  opt_ = prototype.clone_over(zero_->shard_params());
  // The prototype's state in the single-rank layout. An f32 model's values are their own
  // masters, and its values are already in the shards.
  std::map<std::string, Tensor> whole;
  for (auto& [name, t] : prototype.state()) whole[name] = t;
  zero_->load_whole_state(
      [&](const std::string& n) { auto it = whole.find(n); return it == whole.end() ? nullptr : &it->second; }, *opt_,
      false);
}

// Stage 3 only gathers, prefetches and frees (the calls do nothing at stages 1 and 2, whose
// values stay whole); need_values also completes a stage 1/2 gather still in flight.
// (A pipeline stage's units need not include unit 0's parameters: sharded() says.)
void ZeroStrategy::before_forward(int unit, Part part) {
  if (sharded(unit) < 0) return;
  zero_->need_values(sharded(unit));
  if (part == Part::Embed) zero_->prefetch_values(sharded(1));  // ignored without blocks
  if (part == Part::Block) zero_->prefetch_values(unit < num_blocks_ ? sharded(unit + 1) : sharded(0));  // the next block, or the head
}

void ZeroStrategy::after_forward(int unit, Part part) {
  if (sharded(unit) < 0) return;
  if (part != Part::Head) zero_->release_values(sharded(unit));  // the head's values serve its backward next
}

void ZeroStrategy::before_backward(int unit, Part part) {
  if (part == Part::Head) {
    zero_->prefetch_values(sharded(num_blocks_));  // the last block, during the head's backward
    if (sharded(0) >= 0) zero_->begin_grads(sharded(0));
  } else if (part == Part::Block) {
    zero_->need_values(sharded(unit));
    if (unit > 1) zero_->prefetch_values(sharded(unit - 1));  // the block before
    zero_->begin_grads(sharded(unit));
  }
  // Part::Embed: the embedding's backward needs only its grads, begun with the head's
  // (unless an interleaved pipeline reduced them in between: then begun again here).
  if (part == Part::Embed && sharded(0) >= 0) zero_->begin_grads(sharded(0));
}

void ZeroStrategy::after_backward(int unit, Part part, bool last) {
  if (sharded(unit) < 0) return;
  // ZeRO-1 accumulates whole grads and reduces once; stages 2/3 keep only shards, so they
  // reduce every micro-batch and accumulate the sums.
  if (grads_final(part) && (last || zero_->stage() >= 2)) zero_->reduce_grads(sharded(unit));
  if (part != Part::Embed) zero_->release_values(sharded(unit));  // unit 0's went after the head
}

bool ZeroStrategy::local_squared_norm(SquaredNorm& sq) const {
  zero_->squared_grad_norm(sq.split, sq.replicated);
  return true;
}

void ZeroStrategy::sum_squared_norm(SquaredNorm& sq) {
  sq.split = exact_sum(dp_, sq.split, device_);
  sq.replicated = exact_sum(dp_, sq.replicated, device_);
}

std::vector<nn::StateTensor> ZeroStrategy::whole_state(optim::Optimizer& opt) {
  if (zero_->stage() == 3) zero_->gather_all();
  for (int k = 0; k < zero_->num_units(); ++k) zero_->need_values(k);  // stages 1/2: pending gathers
  return zero_->whole_state(opt);
}

std::vector<nn::StateTensor> ZeroStrategy::load_targets(optim::Optimizer& opt) {
  // Every rank reads the whole tensors, then keeps its shards: nothing is written before
  // the whole checkpoint was read and checked.
  load_buffers_ = zero_->whole_state_templates(opt);
  std::vector<nn::StateTensor> dest;
  for (auto& [name, t] : load_buffers_) dest.push_back({name, t, nn::ShardSpec{}});
  return dest;
}

void ZeroStrategy::finish_load(optim::Optimizer& opt) {
  std::map<std::string, const Tensor*> by_name;
  for (auto& [name, t] : load_buffers_) by_name[name] = &t;
  zero_->load_whole_state(
      [&](const std::string& n) { auto it = by_name.find(n); return it == by_name.end() ? nullptr : it->second; }, opt,
      true);
  load_buffers_.clear();
}

}  // namespace dt::parallel
