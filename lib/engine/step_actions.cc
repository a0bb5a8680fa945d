// The executor of a step's actions (engine/train_engine.h): one loop that runs any
// schedule (parallel/pipeline_schedule.h), the plain one included, over the micro-batches.
// Compute actions run here, unit by unit with the strategies' hooks around each;
// communication actions go to the strategy that gave the schedule. A split backward (Bi,
// then W later) runs the chunk's backward with its linear layers' weight gradients queued
// (nn::ScopedDeferWeightGrads) and its units' after-backward hooks postponed: W computes
// the queue and then runs the hooks, so strategies see each unit's gradients final then.
#include <chrono>
#include <map>

#include "core/error.h"
#include "core/trace.h"
#include "engine/train_engine.h"

namespace dt::engine {

using parallel::PipeAction;
using parallel::PipeOp;
using parallel::Part;

const std::vector<PipeAction>& TrainEngine::actions_for(int64_t M, bool forward_only) {
  for (auto& s : strategies_)
    if (const std::vector<PipeAction>* a = s->pipe_actions(M, forward_only)) return *a;
  plain_.clear();
  for (int m = 0; m < static_cast<int>(M); ++m) {
    plain_.push_back({PipeOp::Forward, m, 0});
    if (!forward_only) plain_.push_back({PipeOp::Backward, m, 0});
  }
  return plain_;
}

template <class Compute>
void TrainEngine::forward_unit(int unit, Part part, const std::string& what, Compute&& compute) {
  cancel_point(call_);
  for (auto& s : strategies_) s->before_forward(unit, part);
  {
    TraceSpan span("compute", "forward " + what);
    compute();
  }
  for (auto& s : strategies_) s->after_forward(unit, part);
}

template <class Compute>
void TrainEngine::backward_unit(int unit, Part part, bool last, const std::string& what, Compute&& compute) {
  cancel_point(call_);
  for (auto& s : strategies_) s->before_backward(unit, part);
  {
    TraceSpan span("compute", "backward " + what);
    compute();
  }
  // The user's hook first: a test's hook may plant values that a strategy must then reduce.
  auto after = [this, unit, part, last] {
    if (hook_ && last && parallel::grads_final(part)) hook_(units_.params[static_cast<size_t>(unit)]);
    for (auto& s : strategies_) s->after_backward(unit, part, last);
  };
  // A split backward's input pass: the gradients are final only after its weight pass,
  // which runs these then (run_actions).
  if (postponed_)
    postponed_->push_back(after);
  else
    after();
}

// Unit 0 (embeddings, final norm, head) has its hooks called on every rank in the whole
// model's order, its Embed part with the rank's first chunk and its Head part with its
// last, whether or not this stage holds those pieces: a strategy sees each unit's final
// gradients once per micro-batch wherever it is (parallel/strategy.h), and a stage without
// them simply computes nothing there.
double TrainEngine::forward_chunk(int chunk, const MicroBatch& mb, nn::GPTActs& a) {
  const nn::BlockRange r = model_.chunks()[static_cast<size_t>(chunk)];
  const int chunks = static_cast<int>(model_.chunks().size());
  if (chunk == 0)
    forward_unit(0, Part::Embed, "embed", [&] {
      if (model_.has_embed()) model_.embed(mb.in, a);
    });
  for (int i = r.begin; i < r.end; ++i)
    forward_unit(block_unit_[static_cast<size_t>(i)], Part::Block, "block " + std::to_string(i),
                 [&] { model_.forward_blocks(i, i + 1, a); });
  double loss = 0.0;
  if (chunk == chunks - 1)
    forward_unit(0, Part::Head, "head", [&] {
      if (!model_.has_head()) return;
      model_.head(a);
      loss = model_.loss(mb.tg, opt_cfg_.ignore_index, a) * static_cast<double>(a.ce.count);
    });
  return loss;
}

void TrainEngine::backward_chunk(int chunk, const MicroBatch& mb, nn::GPTActs& a, bool last) {
  // GPT::backward, unit by unit, so that strategies can reduce each unit's gradients while
  // the next one computes (DDP's buckets, ZeRO's reduce-scatters).
  const nn::BlockRange r = model_.chunks()[static_cast<size_t>(chunk)];
  const int chunks = static_cast<int>(model_.chunks().size());
  if (chunk == chunks - 1)
    backward_unit(0, Part::Head, last, "head", [&] {
      if (!model_.has_head()) return;
      model_.loss_backward(a, mb.grad_scale);
      model_.backward_head(a.dlogits, a);
    });
  for (int i = r.end - 1; i >= r.begin; --i)
    backward_unit(block_unit_[static_cast<size_t>(i)], Part::Block, last, "block " + std::to_string(i),
                  [&] { model_.backward_blocks(i, i + 1, a); });
  if (chunk == 0)
    backward_unit(0, Part::Embed, last, "embed", [&] {
      if (model_.has_embed()) model_.backward_embed(a);
    });
}

double TrainEngine::run_actions(const std::vector<PipeAction>& actions, const std::vector<MicroBatch>& mbs,
                                bool forward_only, parallel::PipeStats& stats) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const int M = static_cast<int>(mbs.size());
  const int chunks = static_cast<int>(model_.chunks().size());
  // A micro-batch's activations live from its first action on this rank to its last (the
  // backward of chunk 0 and the send after it, or an evaluation's last forward); then they
  // return to the pool for the next micro-batch. (A send copies what it sends.)
  std::map<int, std::unique_ptr<nn::GPTActs>> live;
  std::vector<size_t> last_use(static_cast<size_t>(M), 0);
  for (size_t k = 0; k < actions.size(); ++k) last_use[static_cast<size_t>(actions[k].micro)] = k;
  auto acts = [&](int m) -> nn::GPTActs& {
    auto it = live.find(m);
    if (it != live.end()) return *it->second;
    std::unique_ptr<nn::GPTActs> a;
    if (acts_pool_.empty()) {
      a = std::make_unique<nn::GPTActs>();
    } else {
      a = std::move(acts_pool_.back());
      acts_pool_.pop_back();
    }
    model_.begin_acts(mbs[static_cast<size_t>(m)].in.dim(0), mbs[static_cast<size_t>(m)].in.dim(1), *a);
    a->grad_scale = mbs[static_cast<size_t>(m)].grad_scale;  // a stage without the head needs it too
    a->aux_share = mbs[static_cast<size_t>(m)].aux_share;
    return *live.emplace(m, std::move(a)).first->second;
  };
  auto release = [&](int m) {
    auto it = live.find(m);
    DT_ASSERT(it != live.end());
    // The ids and targets may be views of the caller's batch (on the CPU, the embedding and
    // the loss keep the caller's tensor, not a copy): dropped here, so the pool never holds
    // it past this step and memory a host lent (dt_tensor_create_from_memory) is released
    // at its dt_tensor_destroy, as the header promises.
    it->second->ids = Tensor();
    it->second->targets = Tensor();
    routed_.add(it->second->moe, mbs[static_cast<size_t>(m)].share);
    acts_pool_.push_back(std::move(it->second));
    live.erase(it);
  };
  executed_.clear();
  routed_ = {};
  // Split backwards between their input pass and their weight pass (ZB-H1).
  struct SplitBackward {
    nn::WeightGradQueue weights;
    std::vector<std::function<void()>> after_hooks;
  };
  std::map<std::pair<int, int>, SplitBackward> split;
  int alive = 0;
  stats.activation_peak = 0;
  stats.busy_s = 0.0;
  double loss = 0.0;
  for (size_t k = 0; k < actions.size(); ++k) {
    const PipeAction& act = actions[k];
    DT_ASSERT(act.micro >= 0 && act.micro < M && act.chunk >= 0 && act.chunk < chunks);
    const MicroBatch& mb = mbs[static_cast<size_t>(act.micro)];
    nn::GPTActs& a = acts(act.micro);
    executed_.push_back(act);
    if (!parallel::is_compute(act.op)) {
      // A receive's span is the time this stage waited for its input: the bubble, on the
      // trace's idle category (as ZeRO's waits for gathers are).
      const bool recv = act.op == PipeOp::RecvActivation || act.op == PipeOp::RecvGrad;
      TraceSpan span(recv ? "idle" : "pipeline", act.str());
      for (auto& s : strategies_) s->communicate(act, a);
      if (last_use[static_cast<size_t>(act.micro)] == k) release(act.micro);
      continue;
    }
    const auto c0 = clock::now();
    {
      TraceSpan span("pipeline", act.str());
      switch (act.op) {
        case PipeOp::Forward:
          loss += forward_chunk(act.chunk, mb, a);
          stats.activation_peak = std::max(stats.activation_peak, ++alive);
          break;
        case PipeOp::Backward:
          backward_chunk(act.chunk, mb, a, act.micro == M - 1);
          --alive;
          break;
        case PipeOp::BackwardInput: {  // the weight gradients and the after-hooks wait for W
          SplitBackward& sb = split[{act.micro, act.chunk}];
          nn::ScopedDeferWeightGrads defer(&sb.weights);
          postponed_ = &sb.after_hooks;
          try {
            backward_chunk(act.chunk, mb, a, act.micro == M - 1);
          } catch (...) {
            postponed_ = nullptr;
            throw;
          }
          postponed_ = nullptr;
          break;
        }
        case PipeOp::BackwardWeight: {
          auto it = split.find({act.micro, act.chunk});
          DT_ASSERT(it != split.end());
          it->second.weights.run();
          for (auto& fn : it->second.after_hooks) fn();
          split.erase(it);
          --alive;
          break;
        }
        default:
          DT_ASSERT(false);
      }
    }
    stats.busy_s += std::chrono::duration<double>(clock::now() - c0).count();
    if (forward_only && act.op == PipeOp::Forward) {
      --alive;
      for (auto& s : strategies_) s->end_forward_only();
    }
    if (last_use[static_cast<size_t>(act.micro)] == k) release(act.micro);
  }
  DT_ASSERT(live.empty());
  stats.wall_s = std::chrono::duration<double>(clock::now() - t0).count();
  for (auto& s : strategies_) s->sum_pipe_stats(stats);
  return loss;
}

}  // namespace dt::engine
