// The planner's cost model: for a GPT, a layout (engine/plan.h's PlanOptions) and a cluster
// (engine/cluster.h), what each rank holds by ledger tag at its peak, and how long a
// training step takes, as compute (each op from its FLOPs and bytes at the cluster's
// rates), communication (each collective from its bytes, its link's bandwidth and its
// calls' latency) and what overlaps (gradient reductions under the backward on devices that
// run collectives beside compute; a pipeline's bubbles from the schedule's simulator; ranks
// sharing CPU cores filling each other's bubbles). The memory side is an inventory of what
// the library allocates (nn/activation_bytes.h, the ZeRO shards, DDP's flat buffer, the
// gathered units of ZeRO-3), held to the ledger by bench/bench_plan.py and its ctest.
#pragma once
#include <nlohmann/json.hpp>

#include "engine/cluster.h"
#include "engine/plan.h"
#include "nn/config.h"

namespace dt::engine {

// {"step_s", "tokens_per_s", "mfu", "time": {compute, tp, pp, dp, optimizer, exposed...},
//  "ranks": [{"pp_stage", "memory": {tag: bytes}, "peak_bytes"}], "peak_bytes" (the most of
//  any rank), "fits", "device_memory"}. cfg: as plan_json takes it; o: validated there first.
// plan: plan_json(cfg, o)'s result when the caller has it (the search reuses one over the
// ZeRO stages and recompute, which it does not depend on); null: made here.
nlohmann::json cost_json(const nn::GPTConfig& cfg, const PlanOptions& o, const Cluster& cluster,
                         const nlohmann::json* plan = nullptr);


}  // namespace dt::engine
