// Which strategy divides training over each mesh axis, declared once (kAxisStrategies in
// axis_strategies.cc) and read by the Trainer, which names none of them: for each part of a
// layout (parallel/layout.h), the strategies of its axes of more than one rank, in attach
// order (which is hook order): the pipeline first (it adds the tied table's gradient), then
// TP (it sums the norms' partial gradients), then the data-parallel one (DDP or a ZeRO
// stage), which reduces what the others left. A new strategy adds a row there and its own
// files; the engine and the Trainer do not change.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "parallel/layout.h"
#include "parallel/strategy.h"

namespace dt::parallel {

struct StrategyOptions {
  int64_t bucket_bytes = 25 << 20;  // DDP's bucket size
  int zero = 0;                     // 0: DDP over dp; 1, 2, 3: that ZeRO stage
  std::string pp_schedule = "1f1b";
  int64_t micro_batches = 1;
};

// What a strategy is made for: part li of the layout, its model, units and optimizer.
struct PartContext {
  const Layout& layout;
  int li;
  nn::GPT& model;
  const ModelUnits& units;
  optim::Optimizer& opt;
  const StrategyOptions& options;
};

// The combinations the strategies refuse on this layout, before anything is built
// (UNSUPPORTED or INVALID_ARGUMENT naming the option and what would work): ZeRO-3 with a
// pipeline, ZeRO with an offloaded optimizer on GPUs.
void check_strategies(const Layout& layout, const StrategyOptions& o, const optim::Optimizer& opt);

// True when a strategy of this layout steps its own optimizer in place of the engine's
// (ZeRO's shard optimizer, cloned from the one it is given, whose whole state then goes).
bool strategy_owns_optimizer(const Layout& layout, const StrategyOptions& o);

// Part li's strategies, in attach order (empty on a layout of one rank).
std::vector<std::unique_ptr<Strategy>> make_strategies(const PartContext& part);

}  // namespace dt::parallel
