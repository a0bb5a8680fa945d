// dtrain plan's cost model: --cluster (the predicted step and each rank's memory by tag for
// the layout the flags give), --auto (every layout of the cluster, ranked), --calibrate (this
// machine measured as a cluster). The library does the work (dt_plan_json with "cluster",
// dt_cluster_calibrate_json); this prints it.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace dtcli {

// A built-in name ("h100-node", "h100-node:16") as is, or a cluster JSON file's text.
std::string cluster_text(const std::string& flag_value);
void print_cost(const nlohmann::json& cost);
void print_search(const nlohmann::json& search, const std::string& model);
// Measures this machine, prints the rates, writes the cluster JSON to `path`.
int run_calibrate(const std::string& path);

}  // namespace dtcli
