#include "plan_cost_cli.h"

#include <cstdio>
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
  if (s.contains("best_without_host_copy")) {
    const nlohmann::json& r = s["best_without_host_copy"][0];
    std::printf("\n  faster once split layouts stop keeping the whole model's optimizer state on each process's\n"
                "  first rank (the Trainer's host copy, today counted above): %s\n     step %s, peak %s per device\n",
                layout_text(r["layout"]).c_str(), seconds_text(r["step_s"].get<double>()).c_str(),
                bytes_text(r["peak_bytes"].get<double>()).c_str());
  }
  if (s.contains("smallest_that_does_not_fit")) {
    const nlohmann::json& r = s["smallest_that_does_not_fit"];
    std::printf("\n  nothing fits: the smallest peak is %s of %s per device (%s)\n",
                bytes_text(r["peak_bytes"].get<double>()).c_str(), bytes_text(s["device_memory"].get<double>()).c_str(),
                layout_text(r["layout"]).c_str());
  }
}

int run_calibrate(const std::string& path) {
  check_writable("--json", path);
  std::printf("calibrating this machine (a few seconds)...\n");
  std::fflush(stdout);
  const nlohmann::json c = nlohmann::json::parse(
      read_text([&](char* b, size_t cap, size_t* n) { return dt_cluster_calibrate_json(nullptr, b, cap, n); },
                "calibrating"));
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
  write_file(path, c.dump(2) + "\n");
  std::printf("wrote %s (use it as dtrain plan --cluster %s)\n", path.c_str(), path.c_str());
  return 0;
}

}  // namespace dtcli
