// A GPT's parallel plan by formula, before anything is built: what one rank of a dp x tp
// layout holds (model states per ZeRO stage, the paper's Table 1 convention, over the
// parameters its tp part holds), what it moves per step on each axis, and the activations
// of the norm regions that sequence parallelism splits. The figures the library's own
// ledgers measure in a run (tests/multirank/tp_model_test.cc, bench_tp, dtrain train
// --report); `dtrain plan` and `dt_plan_json` print them.
//
// With a pipeline (pp > 1) it also places the blocks into stages exactly as the Trainer
// does (parallel::pipeline_boundaries in parallel/layout.h: one function for both) and runs the schedule on the
// simulator (parallel/pipeline_schedule.h): each stage's model states and activations, the
// bubble by formula and simulated, the activation peaks, the pp traffic and the timeline.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/config.h"

namespace dt::engine {

struct PlanOptions {
  int64_t dp = 1, tp = 1;
  int64_t ep = 1;  // expert parallelism: a mixture of experts' experts split over ep ranks
  // ep > 1: the busiest ep rank's received rows over an even share, as the router will send
  // them (nn::expert_rows; `dtrain train --report` measures both); 0: unstated. expert_load
  // prices a typical step's time (each block waits for its busiest rank), expert_load_peak
  // the memory (a rank's experts' buffers grow to each block's most rows; 0: expert_load).
  double expert_load = 0, expert_load_peak = 0;
  int64_t cp = 1;  // context parallelism: every sequence split over cp ranks (ring attention)
  bool sequence_parallel = false;
  int64_t micro_batch = 1;   // sequences per rank per micro-batch
  int64_t seq_len = 0;       // tokens per sequence (0: the context)
  int64_t accumulation = 1;  // micro-batches per step (a pipeline's M)
  // Pipeline parallelism (engine::ParallelOptions has the same fields): pp stages, the
  // schedule's generator, the model chunks per rank, and optionally the blocks of each of
  // the pp x virtual_stages stages (empty: balanced as the Trainer balances them).
  int64_t pp = 1;
  std::string pp_schedule = "1f1b";
  int virtual_stages = 1;
  std::vector<int> pp_blocks;
  bool timeline_trace = false;  // also the simulated Chrome trace, as "pipeline"."chrome_trace"
  bool timeline = true;         // the text timeline ("pipeline"."timeline"; the search skips it)
  // For the cost model (engine/plan_cost.h): the ZeRO stage, activation checkpointing, and
  // whether the ranks are threads of one process (the local backend) or one process each.
  int zero = 0;
  bool recompute = false;
  bool in_process = true;
};

// The collectives ZeRO runs per unit and step at `stage` (1 to 3) with M micro-batches, each
// moving (N-1)/N of the unit: stage 1 reduce-scatters and gathers once a step; stage 2
// reduce-scatters every micro-batch (it keeps only its shard), gathers once; stage 3 also
// gathers the weights for every micro-batch's forward and backward. The plan's traffic and
// the cost model's time both count them from here.
struct ZeroPasses {
  double scatters, gathers;
};
ZeroPasses zero_passes(int stage, int64_t micro_batches);

// INVALID_ARGUMENT naming what does not split (heads, KV heads, MLP width, vocabulary
// over tp; tokens of a micro-batch under SP) or is out of range.
nlohmann::json plan_json(const nn::GPTConfig& cfg, const PlanOptions& o);

}  // namespace dt::engine
