// dtrain plan's cost model: --cluster (the predicted step and each rank's memory by tag for
// the layout the flags give), --auto (every layout of the cluster, ranked), --calibrate (this
// machine measured as a cluster). The library does the work (dt_plan_json with "cluster",
// dt_cluster_calibrate_json); this prints it.
#pragma once
#include <string>
#include <vector>

#include <cstdint>
#include <functional>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "dtrain/dtrain.h"
#include "model_args.h"

namespace dtcli {

// dtrain plan's "Cost model" flags.
struct CostArgs {
  std::string cluster, backend = "local";
  bool auto_search = false, calibrate = false;
  int64_t calibrate_repeats = 1;             // --calibrate-repeats: the median of this many
  std::vector<std::string> median_of_files;  // --median-of: the clusters to take the median of
  int64_t global_batch = 0, seq = 0, top = 5;
  // --serve: the serving planner's workload and targets (0: the library's default / none).
  bool serve = false;
  int64_t prompt = 0, output = 0, batch = 0, max_num_seqs = 0, max_batched_tokens = 0;
  double itl_target_ms = 0, ttft_target_ms = 0, memory_fraction = 0;
  double expert_load = 0, expert_load_peak = 0;  // --expert-load, --expert-load-peak (0: unstated)
  void add_to(CLI::App& app);
  // dt_plan_json's cost-model keys (null without --cluster): the ZeRO stage and recompute
  // are the plan's own flags.
  std::function<void(dt_options*)> keys(int64_t zero, bool recompute) const;
};

// --auto: the search, printed (and written to `json` when given).
int run_search(const CostArgs& a, const ModelArgs& model, int64_t context, const std::string& json);

// --serve: one serving layout's cost (replicas = dp), or with --auto every layout ranked.
int run_serve(const CostArgs& a, const ModelArgs& model, int64_t context, int64_t dp, int64_t tp, int64_t pp,
              const std::string& json);

// A built-in name ("h100-node", "h100-node:16") as is, or a cluster JSON file's text.
std::string cluster_text(const std::string& flag_value);
void print_cost(const nlohmann::json& cost);
void print_search(const nlohmann::json& search, const std::string& model);
// Measures this machine, prints the rates, writes the cluster JSON to `path`. backend "mpi"
// (under mpirun -np 2): the collectives between the two processes, added to the cluster
// already in `path` as its "processes" link.
// repeats > 1 (local only): that many calibrations, each figure's median written.
int run_calibrate(const std::string& path, const std::string& backend, int64_t repeats = 1);
// --median-of: the field-wise median of cluster files (dt_cluster_median_json), written to `path`.
int run_median(const std::vector<std::string>& files, const std::string& path);

}  // namespace dtcli
