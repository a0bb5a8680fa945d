// The planner for serving: for a GPT, a cluster and a workload (prompt and output lengths,
// a latency target), what one layout of replicas x tp x pp holds per rank (weights, the
// paged KV cache of its running sequences, workspace) and how fast it decodes (the
// inter-token latency at a batch of running sequences, the time to the first token, the
// tokens per second of all replicas); and the search over every layout of a cluster's
// devices for the one that serves the most tokens per second within the target.
//
// The step it costs is the serving engine's (serve/engine.h, serve/model_runner.cc): every
// running sequence decodes one token per step, its linear layers run once over the batch
// (each GEMM at the larger of its compute time and its weights' read time: decode is bound
// by memory at small batches), attention reads each sequence's cached keys and values, tp
// all-reduces twice per block and gathers the logits, and a pipeline's stages take up to pp
// groups of the batch in turn (the runner's split_batch). New requests' prompts are
// prefilled in the same steps, so each step also carries its share of them: batch / output
// requests finish and are replaced per step.
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

#include "engine/cluster.h"
#include "nn/config.h"

namespace dt::engine {

struct ServePlanOptions {
  int64_t replicas = 1, tp = 1, pp = 1;  // the layout (one layout's cost; the search sets them)
  int64_t prompt = 512;                  // prompt tokens per request
  int64_t output = 128;                  // generated tokens per request
  int64_t batch = 0;                     // running sequences per replica; 0: the most that fit and meet the targets
  int64_t max_num_seqs = 256;            // the engine's cap on running sequences (EngineConfig)
  int64_t max_batched_tokens = 0;        // tokens per step (prefill chunks); 0: 256 on a CPU (the
                                         // engine's default), 2048 on GPUs (a GPU engine's usual chunk)
  int64_t block_size = 16;               // positions per KV block
  double memory_fraction = 0.9;          // of a device's memory for weights, workspace and KV cache
  double itl_target_s = 0;               // inter-token latency target (0: none)
  double ttft_target_s = 0;              // time to a lone request's first token (0: none)
  bool in_process = true;                // the ranks are threads of one process (the local backend)
  int64_t top = 5;                       // the search: layouts returned
  // INVALID_ARGUMENT naming the field and its accepted range.
  void check(const nn::GPTConfig& cfg) const;
};

// One layout: {"layout": {replicas, tp, pp}, "batch", "max_batch_by_memory", "itl_s",
// "ttft_s", "tokens_per_s", "time": {...}, "ranks": [{"pp_stage", "memory": {weights,
// kv_cache, workspace}, "peak_bytes", "kv_bytes_per_sequence"}], "peak_bytes", "fits",
// "meets_targets"}. With batch 0 the batch is chosen as the search chooses it.
nlohmann::json serve_cost_json(const nn::GPTConfig& cfg, const ServePlanOptions& o, const Cluster& cluster);

// Every replicas x tp x pp of the cluster's devices (tp within a host), each at its best
// batch, ranked by tokens per second among those that fit and meet the targets:
// {"devices", "evaluated", "rejected": {reason: count}, "best": [... with "loses_by"]}.
nlohmann::json serve_search_json(const nn::GPTConfig& cfg, const ServePlanOptions& o, const Cluster& cluster);

// The serving model's forward times on one rank alone, without sampling or the engine: a
// prefill of `prompt` tokens of one sequence, and a decode step of `seqs` sequences at
// `ctx` positions, with the cached rows its attention stages (seqs x layers x query heads x
// ctx). What dtrain plan --calibrate fits the cluster's serving fields with.
struct ServeForwardTimes {
  double prefill_s = 0, decode_s = 0, kv_rows = 0;
};
ServeForwardTimes serve_forward_times(const nn::GPTConfig& cfg, const Cluster& cluster, int64_t prompt, int64_t seqs,
                                      int64_t ctx);

}  // namespace dt::engine
