// dtrain inspect DIR: what a Hugging Face model directory holds, and the memory each layout
// needs per rank; dtrain export: a checkpoint (trained under any layout) back to a Hugging
// Face directory that transformers loads.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "flags.h"
#include "hf_args.h"
#include "model_args.h"

namespace dtcli {
namespace {

// Parameters per rank of the widest-loaded rank for tp x pp, or -1 when it does not split.
int64_t params_per_rank(const nlohmann::json& config, int64_t tp, int64_t pp) {
  Options cfg = options_from_config(config), plan = make_options();
  set(plan.get(), "tp", tp);
  set(plan.get(), "pp", pp);
  size_t needed = 0;
  if (dt_plan_json(cfg.get(), plan.get(), nullptr, 0, &needed) != DT_OK) return -1;
  std::string s(needed, '\0');
  if (dt_plan_json(cfg.get(), plan.get(), s.data(), s.size(), &needed) != DT_OK) return -1;
  s.resize(needed - 1);
  const nlohmann::json p = nlohmann::json::parse(s);
  if (pp == 1) return p["params_per_tp_rank"].get<int64_t>();
  double most = 0;
  for (const nlohmann::json& st : p["pipeline"]["stages"]) most = std::max(most, st["params"].get<double>());
  return static_cast<int64_t>(most);
}

struct InspectArgs {
  std::string dir, json;
};

int run_inspect(const InspectArgs& a) {
  nlohmann::json info = hf_inspect(a.dir);
  const nlohmann::json& c = info["config"];
  std::printf("%s: %s, %s parameters, stored as %s in %zu file(s) (%s)\n", a.dir.c_str(),
              info["architecture"].get<std::string>().c_str(),
              format_count(info["parameters"].get<double>()).c_str(), info["stored_dtype"].get<std::string>().c_str(),
              info["files"].size(), format_bytes(info["weight_bytes"].get<double>()).c_str());
  std::printf("  layers %lld, d_model %lld, heads %lld (kv %lld), d_ff %lld, vocab %lld, context %lld, %s, %s, %s%s\n",
              (long long)c["n_layer"], (long long)c["d_model"], (long long)c["n_head"], (long long)c["n_kv_head"],
              (long long)c["d_ff"], (long long)c["vocab_size"], (long long)c["context"],
              c["norm"].get<std::string>().c_str(), c["pos"].get<std::string>().c_str(),
              c["act"].get<std::string>().c_str(), c["tied_embeddings"].get<bool>() ? ", tied head" : "");
  if (c.contains("moe")) {
    const nlohmann::json& m = c["moe"];
    const std::string shared = m.contains("shared_d_ff") ? ", a shared expert of width " +
                                                               std::to_string(m["shared_d_ff"].get<int64_t>()) +
                                                               (m.value("shared_gate", false) ? " (gated)" : "")
                                                         : std::string();
    std::printf("  a mixture of experts: %lld experts, top %lld, %s gates%s%s\n", (long long)m["experts"],
                (long long)m["top_k"], m["gating"].get<std::string>().c_str(),
                m.value("renormalize", true) ? "" : " (not renormalised)", shared.c_str());
  }
  std::printf("  bos %lld, eos [%s]\n", (long long)info["bos_token_id"], stop_ids_text(info).c_str());
  // Per rank: the weights for serving in bf16, and for training with AdamW (weights,
  // gradients and two moments: 16 bytes a parameter in f32, as in bf16 with f32 masters).
  std::printf("memory per rank by layout (the most loaded rank):\n  %-10s %14s %16s %18s\n", "layout", "parameters",
              "bf16 weights", "AdamW training");
  nlohmann::json layouts = nlohmann::json::array();
  for (int64_t pp : {1, 2, 4})
    for (int64_t tp : {1, 2, 4, 8}) {
      if (pp > c["n_layer"].get<int64_t>()) continue;
      const int64_t n = params_per_rank(c, tp, pp);
      if (n < 0) continue;
      const std::string name = "tp " + std::to_string(tp) + " pp " + std::to_string(pp);
      std::printf("  %-10s %14s %16s %18s\n", name.c_str(), format_count(double(n)).c_str(),
                  format_bytes(2.0 * n).c_str(), format_bytes(16.0 * n).c_str());
      layouts.push_back({{"tp", tp}, {"pp", pp}, {"params_per_rank", n}, {"bf16_weight_bytes", 2 * n},
                         {"adamw_training_bytes", 16 * n}});
    }
  info["layouts"] = layouts;
  if (!a.json.empty()) write_file(a.json, info.dump(2) + "\n");
  return 0;
}

struct ExportArgs {
  std::string checkpoint = "runs/latest/ckpt", model, hf, precision, tokenizer_from, architecture;
  int64_t max_shard_mb = 4096;
  bool random_init = false;
};

int run_export(const ExportArgs& a) {
  if (a.hf.empty()) throw UsageError("--hf OUT is required: the directory to write");
  if (!a.model.empty()) {  // a Hugging Face directory rewritten: another precision, shard size or architecture
    Module m;
    if (a.random_init) {
      Options mo = make_options();
      set(mo.get(), "precision", a.precision.empty() ? std::string("f32") : a.precision);
      set_bool(mo.get(), "random_init", true);
      dt_module* raw = nullptr;
      check(dt_module_create_from_hf(a.model.c_str(), mo.get(), &raw), "building a model of " + a.model + "'s config");
      m.reset(raw);
    } else {
      m = load_hf_module(a.model, "stored", 0);
    }
    const nlohmann::json info = hf_inspect(a.model);
    const std::string eos = stop_ids_text(info);
    Options o = make_options();
    if (!a.precision.empty()) set(o.get(), "precision", a.precision);
    set(o.get(), "architecture", a.architecture.empty() ? info["architecture"].get<std::string>() : a.architecture);
    set(o.get(), "tokenizer_from", a.tokenizer_from.empty() ? a.model : a.tokenizer_from);
    if (info["bos_token_id"].get<int64_t>() >= 0) set(o.get(), "bos_token_id", info["bos_token_id"].get<int64_t>());
    if (!eos.empty()) set(o.get(), "eos_token_ids", eos);
    set(o.get(), "max_shard_bytes", a.max_shard_mb << 20);
    check(dt_module_save_hf(m.get(), a.hf.c_str(), o.get()), "exporting to " + a.hf);
    std::printf("wrote %s from %s\n", a.hf.c_str(), a.model.c_str());
    return 0;
  }
  Loaded l = load_checkpoint(a.checkpoint);
  // The model directory the run started from (dtrain train --init hf:DIR records it):
  // its tokenizer files and token ids travel with the export.
  const HfSource src = hf_source_of_run(std::filesystem::path(a.checkpoint).parent_path().string());
  const std::string tok = a.tokenizer_from.empty() ? src.dir : a.tokenizer_from;
  Options o = make_options();
  if (!a.precision.empty()) set(o.get(), "precision", a.precision);
  if (!a.architecture.empty()) set(o.get(), "architecture", a.architecture);
  else if (!src.architecture.empty()) set(o.get(), "architecture", src.architecture);
  if (!tok.empty()) set(o.get(), "tokenizer_from", tok);
  if (src.bos >= 0) set(o.get(), "bos_token_id", src.bos);
  if (!src.eos.empty()) set(o.get(), "eos_token_ids", src.eos);
  set(o.get(), "max_shard_bytes", a.max_shard_mb << 20);
  check(dt_engine_save_hf(l.engine.get(), a.hf.c_str(), o.get()), "exporting to " + a.hf);
  std::printf("wrote %s (Hugging Face: config.json, generation_config.json, safetensors%s), step %lld of %s\n",
              a.hf.c_str(), tok.empty() ? "" : ", tokenizer files", (long long)l.info.value("step", int64_t(0)),
              a.checkpoint.c_str());
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto a = std::make_shared<InspectArgs>();
  CLI::App* c = app.add_subcommand("inspect", "Describe a Hugging Face model directory and its memory per layout");
  c->footer("Example:\n  dtrain inspect path/to/SmolLM2-135M");
  c->add_option("dir", a->dir, "The model directory (config.json, *.safetensors)")->required();
  c->add_option("--json", a->json, "Also write the description as JSON to this file");
  c->callback([a] { throw Exit{run_inspect(*a)}; });
}

void add_export_command(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* c = app.add_subcommand("export", "Write a checkpoint as a Hugging Face model directory");
  c->footer("Example:\n  dtrain export --checkpoint runs/ft/ckpt --hf out/my-model --precision bf16");
  c->add_option("--checkpoint", a->checkpoint, "Checkpoint stem (what dtrain train wrote: RUN_DIR/ckpt)")->capture_default_str();
  c->add_option("--model", a->model, "Instead of --checkpoint: a Hugging Face directory to rewrite (precision, shards)");
  c->add_option("--hf", a->hf, "Directory to write (created if missing)")->required();
  c->add_flag("--random-init", a->random_init,
              "With --model: the config's shape with fresh random weights (the directory needs no weights)");
  c->add_option("--precision", a->precision, "f32 | bf16 | f16 of the stored weights (default: the model's)");
  c->add_option("--architecture", a->architecture,
                "GPT2LMHeadModel | LlamaForCausalLM | Qwen2ForCausalLM | MistralForCausalLM (default: the run's, "
                "else the one the model's config is)");
  c->add_option("--tokenizer-from", a->tokenizer_from,
                "Copy the tokenizer files from this directory (default: the model the run started from)");
  add_int(c, "--max-shard-mb", a->max_shard_mb, {1, 1 << 30}, "Shard the weights past this many MiB per file");
  c->callback([a] { throw Exit{run_export(*a)}; });
}

}  // namespace dtcli
