// dt_module (GPT and MLP from options, parameter access) and dt_optimizer (AdamW, SGD).
#include <cmath>
#include <map>
#include <sstream>

#include "comm/mesh.h"
#include "core/device_scope.h"
#include "lib/api/firewall.h"
#include "nn/config.h"
#include "engine/calibrate.h"
#include "engine/plan.h"
#include "engine/plan_cost.h"
#include "engine/plan_search.h"
#include "engine/plan_serve.h"
#include "engine/trainer.h"
#include "nn/gpt.h"
#include "nn/mlp_model.h"
#include "optim/optimizer.h"

using dt::api::guard;
using dt::api::need;

namespace {

// Picks one of `names` (matched exactly); the error names the option and lists them all.
template <class E>
E pick(const std::string& key, const std::string& value, const std::vector<std::pair<const char*, E>>& names) {
  std::string accepted;
  for (const auto& [n, e] : names) {
    if (value == n) return e;
    accepted += std::string(accepted.empty() ? "" : ", ") + "\"" + n + "\"";
  }
  dt::invalid("option \"" + key + "\" = \"" + value + "\"; accepted: " + accepted);
}

// Reads a positive integer option; the config validators would also catch <= 0, but this
// message names the option key the host actually passed.
int64_t positive_int(const dt::OptionReader& r, const char* key, int64_t fallback, int64_t min = 1) {
  int64_t v = r.get_int(key, fallback);
  DT_CHECK(v >= min, std::string("option \"") + key + "\" = " + std::to_string(v) + "; accepted: >= " +
                         std::to_string(min));
  return v;
}

const std::vector<std::string>& gpt_keys() {
  static const std::vector<std::string> keys = {"preset", "vocab_size", "context", "n_layer", "n_head", "n_kv_head",
                                                "d_model", "d_ff", "norm", "pos", "act", "tied_embeddings", "bias",
                                                "qkv_bias", "norm_eps", "rope_base", "sliding_window",
                                                "experts", "top_k", "moe_gating", "moe_renormalize",
                                                "moe_aux_coef", "moe_z_coef", "moe_capacity", "moe_shared_d_ff", "moe_shared_gate",
                                                "seed", "precision", "device", "recompute"};
  return keys;
}

// Option "device": where the model lives. `fn` is the C entry point the messages name.
dt::Device gpt_device(const dt_options* options, const char* fn) {
  dt::OptionReader r(dt::api::opts_of(options), fn, gpt_keys());
  std::string where = r.get_string("device", "cpu");
  return dt::parse_device(where.c_str(), (std::string(fn) + ": option \"device\"").c_str());
}

dt::nn::GPTConfig gpt_config(const dt_options* options, const char* fn) {
  dt::OptionReader r(dt::api::opts_of(options), fn, gpt_keys());
  dt::nn::GPTConfig c;
  if (r.has("preset")) {
    std::string p = r.get_string("preset", "");
    const dt::nn::GPTConfig* preset = dt::nn::gpt_preset(p);
    if (!preset) dt::invalid("option \"preset\" = \"" + p + "\" is unknown; accepted: " + dt::nn::gpt_preset_names());
    c = *preset;
  }
  c.vocab_size = positive_int(r, "vocab_size", c.vocab_size);
  c.context = positive_int(r, "context", c.context);
  c.n_layer = positive_int(r, "n_layer", c.n_layer);
  c.n_head = positive_int(r, "n_head", c.n_head);
  c.n_kv_head = positive_int(r, "n_kv_head", c.n_kv_head, 0);
  c.d_model = positive_int(r, "d_model", c.d_model);
  c.d_ff = positive_int(r, "d_ff", c.d_ff, 0);
  using dt::nn::NormKind, dt::nn::PosKind, dt::nn::Act;
  c.norm = pick<NormKind>("norm", r.get_string("norm", dt::nn::norm_name(c.norm)),
                          {{"layernorm", NormKind::LayerNorm}, {"rmsnorm", NormKind::RMSNorm}});
  c.pos = pick<PosKind>("pos", r.get_string("pos", c.pos == PosKind::RoPE ? "rope" : "learned"),
                        {{"learned", PosKind::Learned}, {"rope", PosKind::RoPE}});
  c.act = pick<Act>("act", r.get_string("act", c.act == Act::SwiGLU ? "swiglu" : "gelu"),
                    {{"gelu", Act::GELU}, {"swiglu", Act::SwiGLU}});
  c.tied_embeddings = r.get_bool("tied_embeddings", c.tied_embeddings);
  c.bias = r.get_bool("bias", c.bias);
  c.qkv_bias = r.get_bool("qkv_bias", c.qkv_bias);
  const double eps = r.get_double("norm_eps", c.norm_eps), base = r.get_double("rope_base", c.rope_base);
  DT_CHECK(eps >= 0 && eps <= 1, "option \"norm_eps\" = " + std::to_string(eps) + "; accepted: 0 to 1");
  DT_CHECK(base > 0 && base <= 1e12, "option \"rope_base\" = " + std::to_string(base) + "; accepted: > 0, up to 1e12");
  c.norm_eps = static_cast<float>(eps);
  c.rope_base = static_cast<float>(base);
  c.sliding_window = r.get_int("sliding_window", c.sliding_window);
  c.n_experts = positive_int(r, "experts", c.n_experts, 0);
  c.top_k = positive_int(r, "top_k", c.top_k);
  using dt::kernels::MoeGating;
  c.moe_gating = pick<MoeGating>("moe_gating", r.get_string("moe_gating", dt::kernels::moe_gating_name(c.moe_gating)),
                                 {{"softmax", MoeGating::Softmax}, {"sigmoid", MoeGating::Sigmoid}});
  c.moe_renormalize = r.get_bool("moe_renormalize", c.moe_renormalize);
  for (auto [key, field] : {std::pair{"moe_aux_coef", &dt::nn::GPTConfig::moe_aux_coef},
                            std::pair{"moe_z_coef", &dt::nn::GPTConfig::moe_z_coef}}) {
    const double v = r.get_double(key, c.*field);
    DT_CHECK(v >= 0 && v <= 1, std::string("option \"") + key + "\" = " + std::to_string(v) + "; accepted: 0 to 1");
    c.*field = static_cast<float>(v);
  }
  const double cap = r.get_double("moe_capacity", c.moe_capacity);
  DT_CHECK(cap == 0 || (cap >= 0.01 && cap <= 1024), "option \"moe_capacity\" = " + std::to_string(cap) +
                                                         "; accepted: 0 (dropless) or 0.01 to 1024");
  c.moe_capacity = static_cast<float>(cap);
  c.moe_shared_d_ff = positive_int(r, "moe_shared_d_ff", c.moe_shared_d_ff, 0);
  c.moe_shared_gate = r.get_bool("moe_shared_gate", c.moe_shared_gate);
  c.seed = static_cast<uint64_t>(r.get_int("seed", static_cast<int64_t>(c.seed)));
  // Activation checkpointing: a block keeps only its input; backward runs its forward again.
  c.checkpoint = r.get_bool("recompute", c.checkpoint);
  using dt::DType;
  c.dtype = pick<DType>("precision", r.get_string("precision", dt::dtype_name(c.dtype)),
                        {{"f32", DType::F32}, {"bf16", DType::BF16}, {"f16", DType::F16}});
  dt::nn::validate(c);  // the cross-field rules (n_head divides d_model, ...)
  return c;
}

dt::nn::MLPConfig mlp_config(const dt_options* options) {
  dt::OptionReader r(dt::api::opts_of(options), "dt_module_create_mlp", {"sizes", "act", "seed"});
  DT_CHECK(r.has("sizes"), "option \"sizes\" is required: a comma-separated list such as \"4,32,1\"");
  dt::nn::MLPConfig c;
  std::string s = r.get_string("sizes", "");
  // getline drops a trailing empty item: "4,8," would pass as "4,8".
  DT_CHECK(s.empty() || s.back() != ',', "option \"sizes\" = \"" + s + "\" ends in a comma; accepted: comma-separated "
                                         "integers > 0, such as \"4,32,1\"");
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    DT_CHECK(used > 0 && item.find_first_not_of(" ", used) == std::string::npos && v > 0,
             "option \"sizes\" = \"" + s + "\"; accepted: comma-separated integers > 0, such as \"4,32,1\"");
    c.sizes.push_back(v);
  }
  DT_CHECK(c.sizes.size() >= 2, "option \"sizes\" = \"" + s + "\"; accepted: at least two sizes (in, ..., out)");
  c.act = pick<dt::nn::MLPAct>("act", r.get_string("act", "gelu"),
                               {{"gelu", dt::nn::MLPAct::GELU}, {"silu", dt::nn::MLPAct::SiLU}});
  c.seed = static_cast<uint64_t>(r.get_int("seed", static_cast<int64_t>(c.seed)));
  dt::nn::validate(c);
  return c;
}

dt::nn::Module& module_of(const dt_module* m) { return *need(m, "module")->module; }

// dt_plan_json's pipeline keys, checked as dt_engine_create checks its own (the schedule's
// name and virtual stages by ParallelOptions::check, inside plan_json; the block counts by
// parse_block_counts); each needs "pp" > 1, where anything else would be silently ignored.
void pipeline_plan_options(const dt::OptionReader& r, dt::engine::PlanOptions& o) {
  o.pp = r.get_int("pp", 1);
  DT_CHECK(o.pp >= 1 && o.pp <= 1024, "option \"pp\" = " + std::to_string(o.pp) + "; accepted: 1 to 1024");
  for (const char* key : {"pp_schedule", "virtual_stages", "pp_blocks", "timeline_trace"})
    DT_CHECK(o.pp > 1 || !r.has(key), std::string("option \"") + key + "\" needs \"pp\" > 1 (now " +
                                          std::to_string(o.pp) + ")");
  o.pp_schedule = r.get_string("pp_schedule", o.pp_schedule);
  const int64_t v = r.get_int("virtual_stages", o.virtual_stages);
  DT_CHECK(v >= 1 && v <= 64,
           "option \"virtual_stages\" = " + std::to_string(v) + "; accepted: 1 to 64 (>= 2 for interleaved)");
  o.virtual_stages = static_cast<int>(v);
  if (r.has("pp_blocks"))
    o.pp_blocks = dt::engine::parse_block_counts(r.get_string("pp_blocks", ""), "option \"pp_blocks\"");
  o.timeline_trace = r.get_bool("timeline_trace", false);
}

float real_option(const dt::OptionReader& r, const char* key, double fallback, double lo, double hi,
                  const char* range) {
  double v = r.get_double(key, fallback);
  DT_CHECK(std::isfinite(v) && v >= lo && v <= hi,
           std::string("option \"") + key + "\" = " + std::to_string(v) + "; accepted: " + range);
  return static_cast<float>(v);
}

// dt_plan_json with "serve": the serving cost of one layout (dp = replicas, tp, pp), or with
// "search" the ranking of every layout; the training keys are refused by name.
void plan_serving(const dt::nn::GPTConfig& cfg, const dt::OptionReader& r, char* buf, size_t capacity, size_t* needed) {
  for (const char* key : {"ep", "cp", "expert_load", "expert_load_peak", "sequence_parallel", "micro_batch", "seq_len",
                          "accumulation", "pp_schedule", "virtual_stages", "pp_blocks", "timeline_trace", "zero", "recompute",
                          "global_batch"})
    DT_CHECK(!r.has(key), std::string("option \"") + key + "\" is for training plans; with \"serve\": true accepted: "
                          "dp (replicas), tp, pp, prompt, output, batch, max_num_seqs, max_batched_tokens, "
                          "block_size, memory_fraction, itl_target_s, ttft_target_s, in_process, search, top");
  DT_CHECK(r.has("cluster"), "option \"serve\" needs \"cluster\" (a built-in name or a cluster's JSON)");
  dt::engine::ServePlanOptions o;
  o.replicas = r.get_int("dp", 1);
  o.tp = r.get_int("tp", 1);
  o.pp = r.get_int("pp", 1);
  o.prompt = r.get_int("prompt", std::min<int64_t>(o.prompt, cfg.context / 2));
  o.output = r.get_int("output", std::min<int64_t>(o.output, cfg.context - o.prompt));
  o.batch = r.get_int("batch", 0);
  o.max_num_seqs = r.get_int("max_num_seqs", o.max_num_seqs);
  o.max_batched_tokens = r.get_int("max_batched_tokens", o.max_batched_tokens);
  o.block_size = r.get_int("block_size", o.block_size);
  o.memory_fraction = r.get_double("memory_fraction", o.memory_fraction);
  o.itl_target_s = r.get_double("itl_target_s", 0);
  o.ttft_target_s = r.get_double("ttft_target_s", 0);
  o.in_process = r.get_bool("in_process", true);
  o.top = r.get_int("top", 5);
  const dt::engine::Cluster cl = dt::engine::parse_cluster(r.get_string("cluster", ""), "option \"cluster\"");
  if (r.get_bool("search", false)) {
    for (const char* key : {"dp", "tp", "pp", "batch"})
      DT_CHECK(!r.has(key), std::string("option \"") + key + "\" with \"search\": the search chooses it; accepted: "
                                                            "leave it out, or drop \"search\" to cost one layout");
    dt::api::write_text(nlohmann::json{{"serve_search", dt::engine::serve_search_json(cfg, o, cl)}}.dump(), buf,
                        capacity, needed);
  } else {
    DT_CHECK(!r.has("top"), "option \"top\" needs \"search\"");
    dt::api::write_text(nlohmann::json{{"serve_cost", dt::engine::serve_cost_json(cfg, o, cl)}}.dump(), buf, capacity,
                        needed);
  }
}

}  // namespace

extern "C" {

dt_status dt_module_create_gpt(const dt_options* config, dt_module** out) {
  return guard("dt_module_create_gpt", [&] {
    need(out, "out");
    dt::nn::GPTConfig cfg = gpt_config(config, "dt_module_create_gpt");
    const dt::Device device = gpt_device(config, "dt_module_create_gpt");
    dt::require_available(device);  // UNSUPPORTED when this build or machine has no such GPU
    dt::ScopedDevice on(device);    // parameters, and later every buffer, live there
    auto gpt = std::make_shared<dt::nn::GPT>(cfg);
    auto* h = new dt_module{gpt, gpt.get()};
    *out = h;
  });
}

dt_status dt_module_gpt_param_count(const dt_options* config, int64_t* out) {
  return guard("dt_module_gpt_param_count", [&] {
    need(out, "out");
    const dt::nn::GPTConfig cfg = gpt_config(config, "dt_module_gpt_param_count");
    gpt_device(config, "dt_module_gpt_param_count");  // a well-formed name; the device need not be here
    *out = cfg.param_count();
  });
}

dt_status dt_plan_json(const dt_options* config, const dt_options* plan, char* buf, size_t capacity,
                       size_t* needed) {
  return guard("dt_plan_json", [&] {
    const dt::nn::GPTConfig cfg = gpt_config(config, "dt_plan_json");
    gpt_device(config, "dt_plan_json");
    dt::OptionReader r(dt::api::opts_of(plan), "dt_plan_json",
                       {"dp", "tp", "ep", "cp", "expert_load", "expert_load_peak", "sequence_parallel", "micro_batch",
                        "seq_len", "accumulation", "pp", "pp_schedule", "virtual_stages", "pp_blocks", "timeline_trace",
                        "cluster", "zero",
                        "recompute", "in_process", "search", "global_batch", "top", "serve", "prompt", "output",
                        "batch", "max_num_seqs", "max_batched_tokens", "block_size", "memory_fraction",
                        "itl_target_s", "ttft_target_s"});
    if (r.get_bool("serve", false)) return plan_serving(cfg, r, buf, capacity, needed);
    for (const char* key : {"prompt", "output", "batch", "max_num_seqs", "max_batched_tokens", "block_size",
                            "memory_fraction", "itl_target_s", "ttft_target_s"})
      DT_CHECK(!r.has(key), std::string("option \"") + key + "\" is the serving planner's; it needs \"serve\": true");
    dt::engine::PlanOptions o;
    o.dp = r.get_int("dp", 1);
    o.tp = r.get_int("tp", 1);
    o.ep = r.get_int("ep", 1);
    DT_CHECK(o.ep >= 1 && o.ep <= 1024, "option \"ep\" = " + std::to_string(o.ep) + "; accepted: 1 to 1024");
    for (auto [key, v] : {std::pair{"expert_load", &o.expert_load}, std::pair{"expert_load_peak", &o.expert_load_peak}}) {
      *v = r.get_double(key, 0);
      DT_CHECK(*v == 0 || (*v >= 1 && *v <= 1024), std::string("option \"") + key + "\" = " + std::to_string(*v) +
                                                       "; accepted: 1 to 1024 (the busiest ep rank's rows over an even "
                                                       "share), or 0 (unstated)");
      DT_CHECK(*v == 0 || cfg.moe(), std::string("option \"") + key + "\" is a mixture of experts'; accepted with "
                                                                       "\"n_experts\" > 0");
    }
    o.cp = r.get_int("cp", 1);
    DT_CHECK(o.cp >= 1 && o.cp <= 1024, "option \"cp\" = " + std::to_string(o.cp) + "; accepted: 1 to 1024");
    o.sequence_parallel = r.get_bool("sequence_parallel", false);
    o.micro_batch = r.get_int("micro_batch", 1);
    o.seq_len = r.get_int("seq_len", 0);
    o.accumulation = r.get_int("accumulation", 1);
    DT_CHECK(o.dp >= 1 && o.dp <= (1 << 20), "option \"dp\" = " + std::to_string(o.dp) + "; accepted: 1 to 1048576");
    DT_CHECK(o.tp >= 1 && o.tp <= 1024, "option \"tp\" = " + std::to_string(o.tp) + "; accepted: 1 to 1024");
    DT_CHECK(!o.sequence_parallel || o.tp > 1, "option \"sequence_parallel\" needs \"tp\" > 1");
    DT_CHECK(o.micro_batch >= 1 && o.micro_batch <= (1 << 20),
             "option \"micro_batch\" = " + std::to_string(o.micro_batch) + "; accepted: 1 to 1048576");
    DT_CHECK(o.seq_len >= 0, "option \"seq_len\" = " + std::to_string(o.seq_len) + "; accepted: 0 (the context) or more");
    DT_CHECK(o.accumulation >= 1 && o.accumulation <= (1 << 20),
             "option \"accumulation\" = " + std::to_string(o.accumulation) + "; accepted: 1 to 1048576");
    pipeline_plan_options(r, o);
    const int64_t zero = r.get_int("zero", 0);
    DT_CHECK(zero >= 0 && zero <= 3, "option \"zero\" = " + std::to_string(zero) + "; accepted: 0 to 3");
    o.zero = static_cast<int>(zero);
    o.recompute = r.get_bool("recompute", false);
    o.in_process = r.get_bool("in_process", true);
    for (const char* key : {"zero", "recompute", "in_process", "search", "expert_load", "expert_load_peak"})
      DT_CHECK(r.has("cluster") || !r.has(key), std::string("option \"") + key + "\" is the cost model's; it needs "
                                                "\"cluster\" (a built-in name or a cluster's JSON)");
    nlohmann::json out;
    if (r.has("cluster")) {
      const dt::engine::Cluster cl = dt::engine::parse_cluster(r.get_string("cluster", ""), "option \"cluster\"");
      if (r.get_bool("search", false)) {
        dt::engine::SearchOptions so;
        so.global_batch = r.get_int("global_batch", 0);
        so.seq_len = o.seq_len;
        so.top = r.get_int("top", 5);
        so.expert_load = o.expert_load;
        so.expert_load_peak = o.expert_load_peak;
        out = {{"search", dt::engine::search_json(cfg, so, cl)}};
      } else {
        out = dt::engine::plan_json(cfg, o);
        out["cost"] = dt::engine::cost_json(cfg, o, cl);
      }
    } else {
      for (const char* key : {"global_batch", "top"})
        DT_CHECK(!r.has(key), std::string("option \"") + key + "\" needs \"search\" and \"cluster\"");
      out = dt::engine::plan_json(cfg, o);
    }
    dt::api::write_text(out.dump(), buf, capacity, needed);
  });
}

dt_status dt_cluster_calibrate_json(const dt_options* options, char* buf, size_t capacity, size_t* needed) {
  return guard("dt_cluster_calibrate_json", [&] {
    dt::OptionReader r(dt::api::opts_of(options), "dt_cluster_calibrate_json", {"backend"});
    const std::string backend = r.get_string("backend", "local");
    DT_CHECK(backend == "local" || backend == "mpi",
             "option \"backend\" = \"" + backend + "\"; accepted: \"local\" (this host), \"mpi\" (under mpirun -np 2)");
    if (backend == "local") {
      dt::api::write_text(dt::engine::cluster_to_json(dt::engine::calibrate_local()).dump(2), buf, capacity, needed);
      return;
    }
    dt::comm::BackendOptions bo;
    dt::comm::Coords axes{};
    axes.fill(1);
    axes[dt::comm::kDp] = 0;  // the MPI world
    auto mesh = dt::comm::Mesh::create("mpi", axes, bo);
    DT_CHECK(mesh->world_size() == 2, "option \"backend\" = \"mpi\" times the collectives between two processes; "
                                     "accepted: mpirun -np 2 (the world has " + std::to_string(mesh->world_size()) + ")");
    const nlohmann::json out = {{"processes", dt::engine::link_to_json(dt::engine::time_link(*mesh))}};
    dt::api::write_text(out.dump(2), buf, capacity, needed);
  });
}

dt_status dt_cluster_median_json(const char* clusters, char* buf, size_t capacity, size_t* needed) {
  return guard("dt_cluster_median_json", [&] {
    DT_CHECK(clusters, "clusters: expected a JSON array of clusters, got NULL");
    const nlohmann::json j = nlohmann::json::parse(clusters, nullptr, false);
    DT_CHECK(j.is_array() && !j.empty() && j.size() <= 64,
             "clusters: expected a JSON array of 1 to 64 clusters (what dt_cluster_calibrate_json writes)");
    std::vector<dt::engine::Cluster> runs;
    for (size_t i = 0; i < j.size(); ++i) {
      const std::string what = "clusters[" + std::to_string(i) + "]";
      try {
        runs.push_back(dt::engine::cluster_from_json(j[i], what));
      } catch (const dt::Error& e) {  // its range checks name the field alone: say which cluster
        const std::string msg = e.what();
        dt::invalid(msg.rfind(what, 0) == 0 ? msg : what + ": " + msg);
      }
    }
    dt::api::write_text(dt::engine::cluster_to_json(dt::engine::median_cluster(runs)).dump(2), buf, capacity, needed);
  });
}

dt_status dt_module_create_mlp(const dt_options* config, dt_module** out) {
  return guard("dt_module_create_mlp", [&] {
    need(out, "out");
    *out = new dt_module{std::make_shared<dt::nn::MLPModel>(mlp_config(config)), nullptr};
  });
}

void dt_module_destroy(dt_module* module) { delete module; }

dt_status dt_module_param_count(dt_module* module, int64_t* out) {
  return guard("dt_module_param_count", [&] {
    dt::nn::Module& m = module_of(module);
    need(out, "out");
    *out = m.num_parameters();
  });
}

dt_status dt_module_param_count_tensors(dt_module* module, int64_t* out) {
  return guard("dt_module_param_count_tensors", [&] {
    dt::nn::Module& m = module_of(module);
    need(out, "out");
    *out = static_cast<int64_t>(m.parameters().size());
  });
}

dt_status dt_module_param_name(dt_module* module, int64_t index, const char** out) {
  return guard("dt_module_param_name", [&] {
    dt::nn::ParamList ps = module_of(module).parameters();
    need(out, "out");
    DT_CHECK(index >= 0 && index < static_cast<int64_t>(ps.size()),
             "index = " + std::to_string(index) + "; accepted: 0 to " + std::to_string(ps.size() - 1) +
                 " (dt_module_param_count_tensors)");
    *out = ps[static_cast<size_t>(index)]->name.c_str();  // the Parameter lives as long as the module
  });
}

dt_status dt_module_param(dt_module* module, const char* name, dt_tensor** out) {
  return guard("dt_module_param", [&] {
    dt::nn::ParamList ps = module_of(module).parameters();
    std::string n = need(name, "name");
    need(out, "out");
    for (dt::nn::Parameter* p : ps) {
      if (p->name != n) continue;
      DT_CHECK(p->value.defined(), "parameter \"" + n + "\" is sharded away (a ZeRO-3 engine holds 1/dp of it between "
                                   "steps); dt_engine_generate or dt_engine_save gathers it, or read it from a checkpoint");
      auto* h = new dt_tensor();
      h->t = p->value;  // a view: same storage, so host writes reach the model
      h->device_name = p->value.device().str();
      h->owner = module->module;
      h->views = module->views;
      h->param = n;
      *out = h;
      return;
    }
    dt::fail(DT_ERR_NOT_FOUND, "name \"" + n + "\" is not a parameter of this module; see dt_module_param_name (" +
                                   std::to_string(ps.size()) + " parameters, e.g. \"" +
                                   (ps.empty() ? std::string() : ps[0]->name) + "\")");
  });
}

dt_status dt_optimizer_create(dt_module* module, const char* kind, const dt_options* options, dt_optimizer** out) {
  return guard("dt_optimizer_create", [&] {
    dt::nn::Module& m = module_of(module);
    std::string k = need(kind, "kind");
    need(out, "out");
    std::shared_ptr<dt::optim::Optimizer> opt;
    if (k == "adamw") {
      dt::OptionReader r(dt::api::opts_of(options), "dt_optimizer_create(\"adamw\")",
                         {"lr", "beta1", "beta2", "eps", "weight_decay", "offload"});
      dt::optim::AdamWOptions o;
      o.lr = real_option(r, "lr", o.lr, 0, 1e9, ">= 0");
      o.beta1 = real_option(r, "beta1", o.beta1, 0, 0.999999999, "[0, 1)");
      o.beta2 = real_option(r, "beta2", o.beta2, 0, 0.999999999, "[0, 1)");
      o.eps = real_option(r, "eps", o.eps, 1e-30, 1, "(0, 1]");
      o.weight_decay = real_option(r, "weight_decay", o.weight_decay, 0, 1e9, ">= 0");
      o.offload = r.get_bool("offload", false);
      opt = std::make_shared<dt::optim::AdamW>(m.parameters(), o);
    } else if (k == "sgd") {
      dt::OptionReader r(dt::api::opts_of(options), "dt_optimizer_create(\"sgd\")",
                         {"lr", "momentum", "weight_decay", "nesterov", "offload"});
      dt::optim::SgdOptions o;
      o.lr = real_option(r, "lr", o.lr, 0, 1e9, ">= 0");
      o.momentum = real_option(r, "momentum", o.momentum, 0, 1, "[0, 1]");
      o.weight_decay = real_option(r, "weight_decay", o.weight_decay, 0, 1e9, ">= 0");
      o.nesterov = r.get_bool("nesterov", false);
      o.offload = r.get_bool("offload", false);
      DT_CHECK(!o.nesterov || o.momentum > 0, "option \"nesterov\" = 1 needs option \"momentum\" > 0");
      opt = std::make_shared<dt::optim::Sgd>(m.parameters(), o);
    } else {
      dt::invalid("kind \"" + k + "\" is unknown; accepted: \"adamw\", \"sgd\"");
    }
    *out = new dt_optimizer{module->module, std::move(opt)};
  });
}

void dt_optimizer_destroy(dt_optimizer* optimizer) { delete optimizer; }

}  // extern "C"
