#include "plan_cost_cli.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli.h"
#include "flags.h"

namespace dtcli {
namespace {

std::string bytes_text(double b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, b >= 1e9 ? "%.2f GB" : "%.1f MB", b >= 1e9 ? b / 1e9 : b / 1e6);
  return buf;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s >= 1 ? "%.3f s" : "%.2f ms", s >= 1 ? s : s * 1e3);
  return buf;
}

std::string layout_text(const nlohmann::json& l) {
  std::string t = "dp " + std::to_string(l["dp"].get<int64_t>()) + " x tp " + std::to_string(l["tp"].get<int64_t>()) +
                  " x pp " + std::to_string(l["pp"].get<int64_t>());
  if (l.contains("ep")) t += " x ep " + std::to_string(l["ep"].get<int64_t>());
  if (l.contains("cp")) t += " x cp " + std::to_string(l["cp"].get<int64_t>());
  if (l["pp"].get<int64_t>() > 1) {
    t += " " + l["pp_schedule"].get<std::string>();
    if (l["virtual_stages"].get<int>() > 1) t += " v" + std::to_string(l["virtual_stages"].get<int>());
  }
  if (l["zero"].get<int>() > 0) t += ", ZeRO-" + std::to_string(l["zero"].get<int>());
  if (l["sp"].get<bool>()) t += ", sp";
  if (l["recompute"].get<bool>()) t += ", recompute";
  t += ", mb " + std::to_string(l["micro_batch"].get<int64_t>()) + " x " +
       std::to_string(l["micro_batches"].get<int64_t>());
  return t;
}

}  // namespace

std::string cluster_text(const std::string& v) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(v, ec)) return v;  // a built-in name: the library says if it is not one
  std::ifstream in(v);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in) throw UsageError("--cluster " + v + ": could not read the file");
  return ss.str();
}

void print_cost(const nlohmann::json& c) {
  const nlohmann::json& t = c["time"];
  std::printf("\ncost on cluster %s (predicted per step):\n", c["cluster"].get<std::string>().c_str());
  std::printf("  step %s, %.0f tokens/s, MFU %.1f%%\n", seconds_text(c["step_s"].get<double>()).c_str(),
              c["tokens_per_s"].get<double>(), 100.0 * c["mfu"].get<double>());
  std::printf("  critical path %s: compute %s (of it recompute %s), tp communication %s, dp communication\n"
              "  exposed %s, optimizer %s, pipeline bubble %s (%.1f%%)%s\n",
              seconds_text(t["critical_path_s"].get<double>()).c_str(), seconds_text(t["compute_s"].get<double>()).c_str(),
              seconds_text(t["recompute_s"].get<double>()).c_str(), seconds_text(t["tp_comm_s"].get<double>()).c_str(),
              seconds_text(t["dp_comm_exposed_s"].get<double>()).c_str(),
              seconds_text(t["optimizer_s"].get<double>()).c_str(), seconds_text(t["pp_bubble_s"].get<double>()).c_str(),
              100.0 * t["pp_bubble_fraction"].get<double>(),
              t["shared_cores"].get<bool>() ? ";\n  more ranks than cores: the step is their total work over the cores" : "");
  if (t["cp_comm_exposed_s"].get<double>() > 0 || t["ep_comm_s"].get<double>() > 0)
    std::printf("  of compute: cp ring transfers exposed %s, ep all-to-all %s\n",
                seconds_text(t["cp_comm_exposed_s"].get<double>()).c_str(), seconds_text(t["ep_comm_s"].get<double>()).c_str());
  std::printf("  %-6s %10s %10s %10s %10s %10s %10s %12s\n", "stage", "param", "grad", "optimizer", "activation",
              "comm", "transient", "peak");
  for (const auto& r : c["ranks"]) {
    const nlohmann::json& m = r["memory"];
    std::printf("  %-6d %10s %10s %10s %10s %10s %10s %12s\n", r["pp_stage"].get<int>(),
                bytes_text(m["param"].get<double>()).c_str(), bytes_text(m["grad"].get<double>()).c_str(),
                bytes_text(m["optimizer"].get<double>()).c_str(), bytes_text(m["activation"].get<double>()).c_str(),
                bytes_text(m["comm_buffer"].get<double>()).c_str(), bytes_text(m["transient"].get<double>()).c_str(),
                bytes_text(r["peak_bytes"].get<double>()).c_str());
  }
  std::printf("  peak %s of %s per device: %s\n", bytes_text(c["peak_bytes"].get<double>()).c_str(),
              bytes_text(c["device_memory"].get<double>()).c_str(), c["fits"].get<bool>() ? "fits" : "DOES NOT FIT");
}

void print_search(const nlohmann::json& s, const std::string& model) {
  std::printf("%s on %s (%lld devices), global batch %lld: %lld layouts costed, %lld fit\n", model.c_str(),
              s["cluster"].get<std::string>().c_str(), static_cast<long long>(s["devices"].get<int64_t>()),
              static_cast<long long>(s["global_batch"].get<int64_t>()), static_cast<long long>(s["evaluated"].get<int64_t>()),
              static_cast<long long>(s["fitting"].get<int64_t>()));
  for (const auto& [why, n] : s["rejected"].items())
    std::printf("  dropped %lld: %s\n", static_cast<long long>(n.get<int64_t>()), why.c_str());
  int i = 0;
  for (const auto& r : s["best"]) {
    std::printf("\n  %d. %s\n     step %s, %.0f tokens/s, MFU %.1f%%, peak %s per device\n", ++i,
                layout_text(r["layout"]).c_str(), seconds_text(r["step_s"].get<double>()).c_str(),
                r["tokens_per_s"].get<double>(), 100.0 * r["mfu"].get<double>(),
                bytes_text(r["peak_bytes"].get<double>()).c_str());
    if (i > 1) std::printf("     loses to 1. by: %s\n", r["loses_by"].get<std::string>().c_str());
  }
  if (s.contains("smallest_that_does_not_fit")) {
    const nlohmann::json& r = s["smallest_that_does_not_fit"];
    std::printf("\n  nothing fits: the smallest peak is %s of %s per device (%s)\n",
                bytes_text(r["peak_bytes"].get<double>()).c_str(), bytes_text(s["device_memory"].get<double>()).c_str(),
                layout_text(r["layout"]).c_str());
  }
}

namespace {
// The library's field-wise median of a JSON array of clusters.
nlohmann::json median_of(const nlohmann::json& clusters) {
  const std::string text = clusters.dump();
  return nlohmann::json::parse(read_text_once(
      [&](char* b, size_t cap, size_t* n) { return dt_cluster_median_json(text.c_str(), b, cap, n); },
      "the calibrations' median"));
}
}  // namespace

int run_median(const std::vector<std::string>& files, const std::string& path) {
  check_writable("--json", path);
  nlohmann::json clusters = nlohmann::json::array();
  for (const std::string& f : files) {
    std::ifstream in(f);
    if (!in) throw UsageError("--median-of " + f + ": could not be read; accepted: cluster JSON files (dtrain plan "
                              "--calibrate --json FILE writes one)");
    clusters.push_back(nlohmann::json::parse(in, nullptr, false));
    if (clusters.back().is_discarded()) throw UsageError("--median-of " + f + ": not JSON; accepted: cluster JSON files");
  }
  const nlohmann::json c = median_of(clusters);
  write_file(path, c.dump(2) + "\n");
  std::printf("wrote %s: each figure the median of %zu clusters' (use it as dtrain plan --cluster %s)\n", path.c_str(),
              files.size(), path.c_str());
  return 0;
}

int run_calibrate(const std::string& path, const std::string& backend, int64_t repeats) {
  if (backend == "mpi" && repeats > 1)
    throw UsageError("--calibrate-repeats " + std::to_string(repeats) + " with --backend mpi; accepted: 1 (the "
                     "processes' link is the best of its own repeats)");
  if (backend == "mpi") {
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    const bool lead = !rank || std::string(rank) == "0";
    nlohmann::json cluster;
    if (lead) {
      std::ifstream in(path);
      if (!in) throw UsageError("--calibrate --backend mpi adds the processes' link to a cluster file; run dtrain plan "
                                "--calibrate --json " + path + " first (it could not be read)");
      cluster = nlohmann::json::parse(in, nullptr, false);
      if (!cluster.is_object()) throw UsageError("--json " + path + ": not a cluster's JSON");
    }
    Options o = make_options();
    set(o.get(), "backend", std::string("mpi"));
    const nlohmann::json link = nlohmann::json::parse(read_text_once(
        [&](char* b, size_t cap, size_t* n) { return dt_cluster_calibrate_json(o.get(), b, cap, n); },
        "timing Open MPI's collectives between the processes"));
    if (!lead) return 0;
    cluster["processes"] = link["processes"];
    std::printf("  between two processes (Open MPI): all-reduce %.1f GB/s, %.1f us a call; send %.1f GB/s\n",
                link["processes"]["bandwidth"].get<double>() / 1e9, link["processes"]["latency"].get<double>() * 1e6,
                link["processes"]["p2p"].get<double>() / 1e9);
    write_file(path, cluster.dump(2) + "\n");
    std::printf("added the processes' link to %s\n", path.c_str());
    return 0;
  }
  check_writable("--json", path);
  nlohmann::json runs = nlohmann::json::array();
  for (int64_t i = 1; i <= repeats; ++i) {
    if (repeats == 1)
      std::printf("calibrating this machine (a few seconds)...\n");
    else
      std::printf("calibrating this machine, %lld of %lld (a few seconds each; then each figure's median)...\n",
                  static_cast<long long>(i), static_cast<long long>(repeats));
    std::fflush(stdout);
    runs.push_back(nlohmann::json::parse(
        read_text_once([&](char* b, size_t cap, size_t* n) { return dt_cluster_calibrate_json(nullptr, b, cap, n); },
                       "calibrating")));
  }
  const nlohmann::json c = repeats == 1 ? runs[0] : median_of(runs);
  std::printf("  cores %lld, memory %s\n", static_cast<long long>(c["devices_per_host"].get<int64_t>()),
              bytes_text(c["device_memory"].get<double>()).c_str());
  std::printf("  GEMM on one core: %.1f GFLOP/s f32, %.1f GFLOP/s bf16, %.1f us a call; on every core %.2fx\n",
              c["matmul_flops_f32"].get<double>() / 1e9, c["matmul_flops_16"].get<double>() / 1e9,
              c["matmul_call_s"].get<double>() * 1e6, c["pool_speedup"].get<double>());
  std::printf("  attention forward on one core: %.1f GFLOP/s; elementwise %.1f GB/s, %.2f us a call\n",
              c["attention_flops_f32"].get<double>() / 1e9, c["memory_bandwidth"].get<double>() / 1e9,
              c["op_call_s"].get<double>() * 1e6);
  std::printf("  all-reduce between two rank threads: %.1f GB/s, %.1f us a call\n",
              c["intra"]["bandwidth"].get<double>() / 1e9, c["intra"]["latency"].get<double>() * 1e6);
  std::printf("  fitted to the reference steps: efficiency %.2f, two ranks side by side %.2f, recompute %.2f of a "
              "forward,\n  ring step %.2f ms, all-to-all %.2f ms, routed pair %.2f us (docs/planner.md)\n",
              c["compute_efficiency"].get<double>(), c["shared_core_speed"].get<double>(),
              c["recompute_ratio"].get<double>(), c["ring_step_s"].get<double>() * 1e3,
              c["ep_exchange_s"].get<double>() * 1e3, c["moe_row_s"].get<double>() * 1e6);
  write_file(path, c.dump(2) + "\n");
  std::printf("wrote %s (use it as dtrain plan --cluster %s)\n", path.c_str(), path.c_str());
  return 0;
}

namespace {

std::string serve_layout_text(const nlohmann::json& l) {
  const int64_t r = l["replicas"].get<int64_t>();
  return std::to_string(r) + (r == 1 ? " replica" : " replicas") + " x tp " + std::to_string(l["tp"].get<int64_t>()) +
         " x pp " + std::to_string(l["pp"].get<int64_t>());
}

void print_serve_row(const nlohmann::json& c) {
  const nlohmann::json& t = c["time"];
  std::printf("     batch %.0f a replica (limited by %s), inter-token latency %s, first token %s, %.0f tokens/s\n",
              c["batch"].get<double>(), c["batch_limited_by"].get<std::string>().c_str(),
              seconds_text(c["itl_s"].get<double>()).c_str(), seconds_text(c["ttft_s"].get<double>()).c_str(),
              c["tokens_per_s"].get<double>());
  std::printf("     step %s = GEMMs %s, attention %s, elementwise %s, tp %s, pp %s, sampling %s, shared cores %s;"
              " prefills %s\n",
              seconds_text(t["step_s"].get<double>()).c_str(), seconds_text(t["gemm_s"].get<double>()).c_str(),
              seconds_text(t["attention_s"].get<double>()).c_str(), seconds_text(t["elementwise_s"].get<double>()).c_str(),
              seconds_text(t["tp_comm_s"].get<double>()).c_str(), seconds_text(t["pp_s"].get<double>()).c_str(),
              seconds_text(t["sampling_s"].get<double>()).c_str(),
              seconds_text(t["shared_cores_extra_s"].get<double>()).c_str(),
              seconds_text(t["prefill_share_s"].get<double>()).c_str());
}

}  // namespace

int run_serve(const CostArgs& a, const ModelArgs& given, int64_t context, int64_t dp, int64_t tp, int64_t pp,
              const std::string& json) {
  if (a.cluster.empty()) throw UsageError("--serve costs serving on a cluster; accepted with --cluster NAME or FILE");
  if (a.auto_search && (dp > 1 || tp > 1 || pp > 1))
    throw UsageError("--serve --auto chooses --dp (replicas), --tp and --pp; accepted: leave them out");
  if (a.auto_search && a.batch > 0) throw UsageError("--serve --auto chooses each layout's --batch; accepted: leave it out");
  if (a.expert_load > 0 || a.expert_load_peak > 0)
    throw UsageError("--expert-load and --expert-load-peak are for training plans; accepted without --serve");
  ModelArgs model = given;
  if (model.precision.empty()) model.precision = "bf16";
  Options po = make_options();
  set_bool(po.get(), "serve", true);
  set(po.get(), "cluster", cluster_text(a.cluster));
  set_bool(po.get(), "in_process", a.backend == "local");
  if (a.auto_search) {
    set_bool(po.get(), "search", true);
    set(po.get(), "top", a.top);
  } else {
    set(po.get(), "dp", dp);
    set(po.get(), "tp", tp);
    set(po.get(), "pp", pp);
    if (a.batch > 0) set(po.get(), "batch", a.batch);
  }
  if (a.prompt > 0) set(po.get(), "prompt", a.prompt);
  if (a.output > 0) set(po.get(), "output", a.output);
  if (a.max_num_seqs > 0) set(po.get(), "max_num_seqs", a.max_num_seqs);
  if (a.max_batched_tokens > 0) set(po.get(), "max_batched_tokens", a.max_batched_tokens);
  if (a.memory_fraction > 0) set(po.get(), "memory_fraction", a.memory_fraction);
  if (a.itl_target_ms > 0) set(po.get(), "itl_target_s", a.itl_target_ms / 1e3);
  if (a.ttft_target_ms > 0) set(po.get(), "ttft_target_s", a.ttft_target_ms / 1e3);
  const Options mo = model.options(context, 1);
  const nlohmann::json j = nlohmann::json::parse(
      read_text([&](char* b, size_t c, size_t* n) { return dt_plan_json(mo.get(), po.get(), b, c, n); },
                "planning serving"));
  const std::string name = (given.parsed && given.parsed->count("--model") ? "--model " + given.preset : "a GPT") +
                           " (" + model.precision + ", " + std::to_string(model.count_params(context)) + " parameters)";
  if (j.contains("serve_search")) {
    const nlohmann::json& s = j["serve_search"];
    std::printf("serving %s on %s (%lld devices), prompt %lld, output %lld tokens", name.c_str(),
                s["cluster"].get<std::string>().c_str(), static_cast<long long>(s["devices"].get<int64_t>()),
                static_cast<long long>(s["prompt"].get<int64_t>()), static_cast<long long>(s["output"].get<int64_t>()));
    if (s["itl_target_s"].get<double>() > 0) std::printf(", ITL target %s", seconds_text(s["itl_target_s"].get<double>()).c_str());
    if (s["ttft_target_s"].get<double>() > 0) std::printf(", TTFT target %s", seconds_text(s["ttft_target_s"].get<double>()).c_str());
    std::printf(": %lld layouts costed, %lld fit and meet the targets\n", static_cast<long long>(s["evaluated"].get<int64_t>()),
                static_cast<long long>(s["fitting"].get<int64_t>()));
    for (const auto& [why, n] : s["rejected"].items())
      std::printf("  dropped %lld: %s\n", static_cast<long long>(n.get<int64_t>()), why.c_str());
    int i = 0;
    for (const auto& r : s["best"]) {
      std::printf("\n  %d. %s\n", ++i, serve_layout_text(r["layout"]).c_str());
      print_serve_row(r);
      if (i > 1) std::printf("     loses to 1. by: %s\n", r["loses_by"].get<std::string>().c_str());
    }
    if (s["best"].empty()) std::printf("\n  no layout fits and meets the targets\n");
  } else {
    const nlohmann::json& c = j["serve_cost"];
    std::printf("serving %s on %s: %s\n", name.c_str(), c["cluster"].get<std::string>().c_str(),
                serve_layout_text(c["layout"]).c_str());
    print_serve_row(c);
    std::printf("  %-6s %10s %10s %10s %12s   (a rank's budget %s)\n", "stage", "weights", "KV cache", "workspace",
                "peak", bytes_text(c["budget_bytes"].get<double>()).c_str());
    for (const auto& r : c["ranks"]) {
      const nlohmann::json& m = r["memory"];
      std::printf("  %-6d %10s %10s %10s %12s\n", r["pp_stage"].get<int>(), bytes_text(m["weights"].get<double>()).c_str(),
                  bytes_text(m["kv_cache"].get<double>()).c_str(), bytes_text(m["workspace"].get<double>()).c_str(),
                  bytes_text(r["peak_bytes"].get<double>()).c_str());
    }
    std::printf("  %s; at most %.0f sequences a replica by memory\n",
                c["fits"].get<bool>() ? (c["meets_targets"].get<bool>() ? "fits and meets the targets" : "fits, MISSES A TARGET")
                                      : "DOES NOT FIT",
                c["max_batch_by_memory"].get<double>());
  }
  if (!json.empty()) write_file(json, j.dump(2) + "\n");
  return 0;
}

void CostArgs::add_to(CLI::App& app) {
  CLI::App* c = &app;
  c->add_option("--cluster", cluster,
                "Cost the layout on this cluster: a built-in (a100-node, h100-node, h200-node, cpu-default; :N for N "
                "hosts, e.g. h100-node:16) or a JSON file (--calibrate writes this machine's)")
      ->group("Cost model");
  c->add_flag("--auto", auto_search, "Search every layout of the --cluster for --global-batch and rank them")
      ->group("Cost model");
  c->add_flag("--calibrate", calibrate,
              "Measure this machine's kernel and collective rates; write them as a cluster (--json, default "
              "local-cluster.json)")
      ->group("Cost model");
  add_int(c, "--calibrate-repeats", calibrate_repeats, {1, 50},
          "With --calibrate: calibrate this many times and write each figure's median (a shared host's single "
          "calibrations differ by 10-20% in their fitted figures)")
      ->group("Cost model");
  c->add_option("--median-of", median_of_files,
                "Write the field-wise median of these cluster files (calibrations of one machine) to --json")
      ->expected(1, 64)
      ->group("Cost model");
  add_int(c, "--global-batch", global_batch, {1, 16777216, "required with --auto"}, "With --auto: sequences per step")
      ->group("Cost model");
  add_int(c, "--seq", seq, {0, 1048576, "the --context"}, "Tokens per sequence (default: the --context)")
      ->group("Cost model");
  add_int(c, "--top", top, {1, 1000}, "With --auto: the layouts printed")->group("Cost model");
  add_real(c, "--expert-load", expert_load, {1, 1024, "an even share (dropless), the capacity bound (with a factor)"},
           "A mixture of experts under --ep: the busiest ep rank's received rows over an even share in a typical step, "
           "which sets its pace (dtrain train --report measures it for each ep, from any layout's run)")
      ->group("Cost model");
  add_real(c, "--expert-load-peak", expert_load_peak, {1, 1024, "--expert-load"},
           "The same at each block's most, which sizes the busiest rank's memory (--report measures it too)")
      ->group("Cost model");
  c->add_flag("--serve", serve,
              "With --cluster: cost serving instead of training (--dp replicas x --tp x --pp); with --auto: every "
              "layout ranked by tokens/s within --itl-target-ms and --ttft-target-ms")
      ->group("Serving plan");
  add_int(c, "--prompt", prompt, {1, 1048576, "min(512, context / 2)"}, "With --serve: prompt tokens per request")
      ->group("Serving plan");
  add_int(c, "--output", output, {1, 1048576, "min(128, the rest of the context)"},
          "With --serve: generated tokens per request")
      ->group("Serving plan");
  add_int(c, "--batch", batch, {1, 1048576, "the most that fit and meet the targets"},
          "With --serve: running sequences per replica")
      ->group("Serving plan");
  add_int(c, "--max-num-seqs", max_num_seqs, {1, 1048576, "256"}, "With --serve: the engine's cap on running sequences")
      ->group("Serving plan");
  add_int(c, "--max-batched-tokens", max_batched_tokens, {1, 16777216, "256 on a CPU, 2048 on GPUs"},
          "With --serve: tokens per engine step (a prefill chunk)")
      ->group("Serving plan");
  add_real(c, "--itl-target-ms", itl_target_ms, {0.001, 1e7, "none"},
           "With --serve: the mean inter-token latency to stay within (ms)")
      ->group("Serving plan");
  add_real(c, "--ttft-target-ms", ttft_target_ms, {0.001, 1e7, "none"},
           "With --serve: a lone request's time to its first token to stay within (ms)")
      ->group("Serving plan");
  add_real(c, "--memory-fraction", memory_fraction, {0.01, 1, "0.9"},
           "With --serve: the share of a device's memory for weights, workspace and KV cache")
      ->group("Serving plan");
  c->add_option("--backend", backend, "With --cluster: local (ranks are threads of one process, the default) or "
                                      "mpi (a process each); with --calibrate under mpirun -np 2: mpi adds the "
                                      "processes' collectives to the --json cluster file")
      ->check(CLI::IsMember({"local", "mpi"}))
      ->group("Cost model");
}

std::function<void(dt_options*)> CostArgs::keys(int64_t zero, bool recompute) const {
  if (cluster.empty()) return nullptr;
  return [this, zero, recompute](dt_options* o) {
    set(o, "cluster", cluster_text(cluster));
    set(o, "zero", zero);
    set_bool(o, "recompute", recompute);
    set_bool(o, "in_process", backend == "local");
    if (expert_load > 0) set(o, "expert_load", expert_load);
    if (expert_load_peak > 0) set(o, "expert_load_peak", expert_load_peak);
    if (auto_search) {
      set_bool(o, "search", true);
      set(o, "global_batch", global_batch);
      set(o, "top", top);
    }
  };
}

int run_search(const CostArgs& a, const ModelArgs& given, int64_t context_flag, const std::string& json) {
  if (a.cluster.empty()) throw UsageError("--auto searches the layouts of a cluster; accepted with --cluster NAME or FILE");
  if (a.global_batch < 1) throw UsageError("--auto needs --global-batch (sequences per step)");
  ModelArgs model = given;
  if (model.precision.empty()) model.precision = "bf16";  // the paper's case, as plan counts it
  const int64_t context = std::max(context_flag, a.seq);
  const nlohmann::json j = model.plan(context, 1, 1, false, 1, a.seq, 1, nullptr, false, 1, 1, a.keys(0, false));
  const std::string name = given.parsed && given.parsed->count("--model") ? "--model " + given.preset : "a GPT";
  print_search(j["search"], name + " (" + model.precision + ", " + std::to_string(model.count_params(context)) +
                                " parameters)");
  if (!json.empty()) write_file(json, j.dump(2) + "\n");
  return 0;
}

}  // namespace dtcli
