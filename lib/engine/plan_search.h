// dtrain plan --auto: every layout of a GPT over a cluster's devices that the library can
// run (dp x tp x pp = the devices, tp within a host; each pipeline schedule and virtual
// stages; ZeRO stage; micro-batch size and count for the global batch; sequence
// parallelism; activation checkpointing), each costed by engine/plan_cost.h, those that do
// not fit a device dropped, the rest ranked by predicted step time; for each runner-up the
// part of the step that makes it lose to the first (memory, bubble, communication).
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

#include "engine/cluster.h"
#include "nn/config.h"

namespace dt::engine {

struct SearchOptions {
  int64_t global_batch = 0;  // sequences per step (required)
  int64_t seq_len = 0;       // 0: the context
  int64_t top = 5;           // layouts returned
  // A mixture's busiest ep rank over an even share (PlanOptions), for every ep tried.
  double expert_load = 0, expert_load_peak = 0;
};

// {"devices", "evaluated", "fitting", "rejected": {reason: count}, "best": [...], each
// {"layout": {...}, "step_s", "tokens_per_s", "mfu", "peak_bytes", "time", "loses_by"}}.
// INVALID_ARGUMENT naming global_batch or top when out of range.
nlohmann::json search_json(const nn::GPTConfig& cfg, const SearchOptions& o, const Cluster& cluster);

}  // namespace dt::engine
