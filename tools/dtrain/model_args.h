// The model flags that `dtrain train` shares with anything else that builds a GPT: a preset
// and the fields that override it, turned into dt_module_create_gpt options.
#pragma once
#include <functional>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli.h"

namespace dtcli {

// The pipeline flags that `dtrain train` and `dtrain plan` share: --pp, --pp-schedule,
// --virtual-stages, --pp-blocks, as the options dt_engine_create and dt_plan_json take
// ("pp_schedule", "virtual_stages", "pp_blocks"; the mesh's and the plan's "pp").
struct PipelineArgs {
  int64_t pp = 1;
  std::string schedule;         // "": the library's default (1f1b)
  int64_t virtual_stages = -1;  // -1: not given (1)
  std::string blocks;           // "": balanced by the library

  void add_to(CLI::App& app);
  // A pipeline flag without --pp >= 2 would be ignored: a usage error naming it instead.
  void check() const;
  // The schedule's name as the library runs it.
  std::string schedule_name() const { return schedule.empty() ? "1f1b" : schedule; }
  // Sets the engine's (and the plan's) keys for what was given; nothing when pp is 1.
  void set_options(dt_options* o) const;
  // The flags given, as typed ("--pp 4 --pp-schedule 1f1b"), for messages.
  std::string flags_text() const;
};

struct ModelArgs {
  std::string preset = "gpt-tiny";
  int64_t layers = -1, d_model = -1, heads = -1, kv_heads = -1, d_ff = -1, vocab = -1;  // -1: not given
  int64_t experts = -1, top_k = -1;  // -1: not given
  double moe_capacity = -1;          // -1: not given
  int64_t shared_expert = -1;        // -1: not given
  std::string norm, pos, act, precision, device;
  bool recompute = false;  // --recompute: activation checkpointing per block
  const CLI::App* parsed = nullptr;  // where add_to put the flags, for given()
  // A Hugging Face model's config (dt_hf_inspect_json's "config", dtrain train --init
  // hf:DIR): then it, not the flags, gives the shape, so counts and plans describe that model.
  nlohmann::json hf_config;

  void add_to(CLI::App& app);
  // True when the command line gave --model or any shape flag (after parsing).
  bool given() const;
  // The dt_module_create_gpt options these flags describe, with `context` as the longest
  // sequence and `seed` for the initial weights. Only what the user gave is set, so the
  // library's messages name the option they typed.
  Options options(int64_t context, int64_t seed) const;
  // Exact parameters of that model, counted by the library without building it
  // (dt_module_gpt_param_count); bad flags fail here with the library's message.
  int64_t count_params(int64_t context) const;
  // The module; a model whose weights alone would not fit in this machine's memory is
  // refused first.
  Module create(int64_t context, int64_t seed) const;
  // The library's parallel plan of this model (dt_plan_json): the parameters one tp rank
  // holds, the tp traffic per block, micro-batch and step, the norm-region activations;
  // with pipe->pp > 1 the pipeline's stages, bubble, peaks and timeline (trace: also the
  // simulated Chrome trace, as "pipeline"."chrome_trace").
  nlohmann::json plan(int64_t context, int64_t dp, int64_t tp, bool sp, int64_t micro_batch, int64_t seq_len,
                      int64_t accumulation, const PipelineArgs* pipe = nullptr, bool trace = false,
                      int64_t ep = 1, int64_t cp = 1,
                      const std::function<void(dt_options*)>& extra = nullptr) const;  // extra: more plan keys
};

// dt_module_create_gpt options from a model config JSON (its keys; the nested rope_scaling,
// which changes no size, is left out).
Options options_from_config(const nlohmann::json& config);

// Bytes per parameter of the model states: weights, gradients and the optimizer state K
// (AdamW: two f32 moments, plus an f32 master copy when weights are 16-bit: K = 12, the ZeRO
// paper's mixed precision). precision "" is the library's default, f32.
struct StateBytes {
  double w, g, k;
};
StateBytes state_bytes(const std::string& precision);

// Per-rank model-state bytes of ZeRO stage `zero` over `ranks` ranks: 0 replicates all; 1
// shards the optimizer state; 2 also the gradients; 3 also the weights.
double stage_bytes(int zero, double params, double ranks, const StateBytes& b);

}  // namespace dtcli
