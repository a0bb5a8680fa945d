#include "model_args.h"

#include <algorithm>

#include "flags.h"

namespace dtcli {

bool ModelArgs::given() const {
  if (!parsed) return false;
  for (const char* f : {"--model", "--layers", "--d-model", "--heads", "--kv-heads", "--d-ff", "--vocab", "--norm", "--pos",
                        "--act", "--experts", "--top-k", "--moe-capacity", "--shared-expert"})
    if (parsed->count(f) > 0) return true;
  return false;
}

void ModelArgs::add_to(CLI::App& app) {
  parsed = &app;
  app.add_option("--model", preset, "Starting shape: gpt-tiny (2 layers, width 64), gpt-small (6 layers, width 384), "
                                    "llama-tiny (gpt-tiny with RMSNorm, RoPE, SwiGLU), mixtral-tiny (llama-tiny "
                                    "with 4 experts, top 2), qwen2-moe-tiny (mixtral-tiny with q/k/v biases, gates "
                                    "not renormalised and a gated shared expert); the flags below override it")
      ->capture_default_str()
      ->group("Model");
  add_int(&app, "--layers", layers, {1, 1024}, "Transformer blocks")->group("Model");
  add_int(&app, "--d-model", d_model, {1, 65536}, "Model width")->group("Model");
  add_int(&app, "--heads", heads, {1, 1024}, "Attention heads (must divide --d-model)")->group("Model");
  add_int(&app, "--kv-heads", kv_heads, {1, 1024, "as many as --heads"},
          "Key/value heads for grouped-query attention (must divide --heads)")
      ->group("Model");
  add_int(&app, "--d-ff", d_ff, {1, 262144, "4 x --d-model"}, "MLP width")->group("Model");
  add_int(&app, "--vocab", vocab, {1, 16777216}, "Vocabulary size (default 256: bytes)")->group("Model");
  app.add_option("--norm", norm, "layernorm or rmsnorm")->group("Model");
  app.add_option("--pos", pos, "Positions: learned or rope")->group("Model");
  app.add_option("--act", act, "MLP activation: gelu or swiglu")->group("Model");
  add_int(&app, "--experts", experts, {0, 1024, "dense"},
          "Mixture of experts: this many MLPs of --d-ff each per block and a router (Mixtral)")
      ->group("Model");
  add_int(&app, "--top-k", top_k, {1, 1024}, "With --experts: the experts each token goes to (default 2)")
      ->group("Model");
  add_int(&app, "--shared-expert", shared_expert, {0, 1048576, "none"},
          "With --experts: a shared expert of this width that every token goes through beside its top-k "
          "(Qwen2-MoE, DeepSeek)")
      ->group("Model");
  add_real(&app, "--moe-capacity", moe_capacity, {0, 1024, "dropless"},
           "With --experts: the capacity factor: an expert takes at most factor x tokens x top-k / experts, the "
           "rest are dropped and counted (default 0: dropless)")
      ->group("Model");
  app.add_option("--precision", precision, "f32 (default), bf16 (f32 master weights) or f16 (plus loss scaling)")
      ->group("Model");
  app.add_option("--device", device, "cpu (default) or cuda:N: where the model lives and its math runs")
      ->group("Model");
  app.add_flag("--recompute", recompute,
               "Activation checkpointing: each block keeps only its input and runs its forward again in backward "
               "(less activation memory, about a third more compute)")
      ->group("Model");
}

Options options_from_config(const nlohmann::json& config) {
  Options o = make_options();
  if (config.contains("moe") && config["moe"].is_object()) {  // the experts, under their option names
    const nlohmann::json& m = config["moe"];
    for (const auto& [key, name] :
         {std::pair{"experts", "experts"}, std::pair{"top_k", "top_k"}, std::pair{"gating", "moe_gating"},
          std::pair{"renormalize", "moe_renormalize"}, std::pair{"aux_coef", "moe_aux_coef"},
          std::pair{"z_coef", "moe_z_coef"}, std::pair{"capacity", "moe_capacity"},
          std::pair{"shared_d_ff", "moe_shared_d_ff"}, std::pair{"shared_gate", "moe_shared_gate"}}) {
      if (!m.contains(key)) continue;
      const nlohmann::json& v = m[key];
      if (v.is_boolean()) set_bool(o.get(), name, v.get<bool>());
      else if (v.is_number_integer()) set(o.get(), name, v.get<int64_t>());
      else if (v.is_number()) set(o.get(), name, v.get<double>());
      else if (v.is_string()) set(o.get(), name, v.get<std::string>());
    }
  }
  for (const auto& [key, v] : config.items()) {
    if (v.is_boolean()) set_bool(o.get(), key.c_str(), v.get<bool>());
    else if (v.is_number_integer()) set(o.get(), key.c_str(), v.get<int64_t>());
    else if (v.is_number()) set(o.get(), key.c_str(), v.get<double>());
    else if (v.is_string()) set(o.get(), key.c_str(), v.get<std::string>());
  }
  return o;
}

Options ModelArgs::options(int64_t context, int64_t seed) const {
  if (!hf_config.is_null()) {
    Options o = options_from_config(hf_config);
    set(o.get(), "context", context);
    set(o.get(), "seed", seed);
    set(o.get(), "precision", precision.empty() ? std::string("f32") : precision);
    return o;
  }
  Options o = make_options();
  set(o.get(), "preset", preset);
  set(o.get(), "context", context);
  set(o.get(), "seed", seed);
  if (layers >= 0) set(o.get(), "n_layer", layers);
  if (d_model >= 0) set(o.get(), "d_model", d_model);
  if (heads >= 0) set(o.get(), "n_head", heads);
  if (kv_heads >= 0) set(o.get(), "n_kv_head", kv_heads);
  if (d_ff >= 0) set(o.get(), "d_ff", d_ff);
  if (vocab >= 0) set(o.get(), "vocab_size", vocab);
  if (!norm.empty()) set(o.get(), "norm", norm);
  if (!pos.empty()) set(o.get(), "pos", pos);
  if (!act.empty()) set(o.get(), "act", act);
  if (experts >= 0) set(o.get(), "experts", experts);
  if (top_k >= 0) set(o.get(), "top_k", top_k);
  if (moe_capacity >= 0) set(o.get(), "moe_capacity", moe_capacity);
  if (shared_expert >= 0) set(o.get(), "moe_shared_d_ff", shared_expert);
  if (!precision.empty()) set(o.get(), "precision", precision);
  if (!device.empty()) set(o.get(), "device", device);
  if (recompute) set_bool(o.get(), "recompute", true);
  return o;
}

int64_t ModelArgs::count_params(int64_t context) const {
  int64_t n = 0;
  check(dt_module_gpt_param_count(options(context, 1).get(), &n), "sizing the model");
  return n;
}

Module ModelArgs::create(int64_t context, int64_t seed) const {
  const double params = static_cast<double>(count_params(context));
  refuse_if_too_big("a model of " + std::to_string(static_cast<long long>(params)) + " parameters",
                    params * state_bytes(precision).w, "its weights alone");
  dt_module* m = nullptr;
  check(dt_module_create_gpt(options(context, seed).get(), &m), "creating the model");
  return Module(m);
}

nlohmann::json ModelArgs::plan(int64_t context, int64_t dp, int64_t tp, bool sp, int64_t micro_batch, int64_t seq_len,
                               int64_t accumulation, const PipelineArgs* pipe, bool trace, int64_t ep,
                               int64_t cp, const std::function<void(dt_options*)>& extra) const {
  Options po = make_options();
  set(po.get(), "dp", dp);
  set(po.get(), "tp", tp);
  if (ep > 1) set(po.get(), "ep", ep);
  if (cp > 1) set(po.get(), "cp", cp);
  set_bool(po.get(), "sequence_parallel", sp);
  set(po.get(), "micro_batch", micro_batch);
  set(po.get(), "seq_len", seq_len);
  set(po.get(), "accumulation", accumulation);
  std::string what = "planning the model";
  if (pipe && pipe->pp > 1) {
    set(po.get(), "pp", pipe->pp);
    pipe->set_options(po.get());
    if (trace) set_bool(po.get(), "timeline_trace", true);
    // The library's message names its option; this names the flags that set it.
    what += " (" + pipe->flags_text() + " --micro-batches " + std::to_string(accumulation) + ")";
  }
  if (extra) extra(po.get());
  const Options mo = options(context, 1);
  return nlohmann::json::parse(
      read_text([&](char* b, size_t c, size_t* n) { return dt_plan_json(mo.get(), po.get(), b, c, n); }, what.c_str()));
}

void PipelineArgs::add_to(CLI::App& app) {
  add_int(&app, "--pp", pp, {1, 1024},
          "Pipeline stages per data-parallel rank: the blocks split into --pp stages in a row (needs --model)")
      ->group("Pipeline");
  // Checked as parsed: "" would read as "not given" below, and "3,1," would lose its last
  // stage on the way to the library, so both are usage errors naming what is accepted.
  app.add_option(
         "--pp-schedule",
         [this](const CLI::results_t& r) {
           if (r.back().empty()) throw UsageError("--pp-schedule \"\": accepted: gpipe, 1f1b, interleaved, zb-h1");
           schedule = r.back();
           return true;
         },
         "With --pp: gpipe, 1f1b (the default), interleaved (with --virtual-stages >= 2) or zb-h1")
      ->type_name("TEXT")
      ->group("Pipeline");
  add_int(&app, "--virtual-stages", virtual_stages, {1, 64},
          "With --pp: model chunks per pipeline rank (interleaved: >= 2, and the micro-batches divisible by --pp)")
      ->group("Pipeline");
  app.add_option(
         "--pp-blocks",
         [this](const CLI::results_t& r) {
           const std::string& s = r.back();
           // Items of 1 to 7 digits, no leading zero (1 to 9999999 blocks), none empty.
           bool ok = !s.empty() && s.find_first_not_of("0123456789,") == std::string::npos;
           size_t at = 0;
           while (ok) {
             const size_t end = std::min(s.find(',', at), s.size());
             ok = end > at && end - at <= 7 && s[at] != '0';
             if (end == s.size()) break;
             at = end + 1;
             ok = ok && at < s.size();  // "3,1," ends in an empty item
           }
           if (!ok)
             throw UsageError("--pp-blocks \"" + s + "\": accepted: comma-separated block counts >= 1, one per stage "
                              "(--pp x --virtual-stages of them, e.g. 3,1)");
           blocks = s;
           return true;
         },
         "With --pp: blocks per stage in stream order, --pp x --virtual-stages counts (e.g. 3,1); default: "
         "balanced, the head counted as vocab / (12 d_model) blocks")
      ->type_name("LIST")
      ->group("Pipeline");
}

void PipelineArgs::check() const {
  if (pp > 1) return;
  const char* given = !schedule.empty() ? "--pp-schedule" : virtual_stages >= 0 ? "--virtual-stages"
                                                        : !blocks.empty()      ? "--pp-blocks"
                                                                               : nullptr;
  if (given)
    throw UsageError(std::string(given) + " applies to pipeline parallelism; accepted with --pp >= 2 (now --pp " +
                     std::to_string(pp) + ")");
}

void PipelineArgs::set_options(dt_options* o) const {
  if (pp < 2) return;
  if (!schedule.empty()) set(o, "pp_schedule", schedule);
  if (virtual_stages >= 0) set(o, "virtual_stages", virtual_stages);
  if (!blocks.empty()) set(o, "pp_blocks", blocks);
}

std::string PipelineArgs::flags_text() const {
  std::string s = "--pp " + std::to_string(pp);
  if (!schedule.empty()) s += " --pp-schedule " + schedule;
  if (virtual_stages >= 0) s += " --virtual-stages " + std::to_string(virtual_stages);
  if (!blocks.empty()) s += " --pp-blocks " + blocks;
  return s;
}

StateBytes state_bytes(const std::string& precision) {
  if (precision.empty() || precision == "f32") return {4, 4, 8};
  if (precision == "bf16" || precision == "f16") return {2, 2, 12};
  throw CliError("--precision \"" + precision + "\"; accepted: f32, bf16, f16");
}

double stage_bytes(int zero, double params, double ranks, const StateBytes& b) {
  switch (zero) {
    case 0: return (b.w + b.g + b.k) * params;
    case 1: return (b.w + b.g) * params + b.k * params / ranks;
    case 2: return b.w * params + (b.g + b.k) * params / ranks;
    default: return (b.w + b.g + b.k) * params / ranks;
  }
}

}  // namespace dtcli
