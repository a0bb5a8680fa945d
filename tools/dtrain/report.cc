// dtrain train --report: what the run held and moved, measured by the library's ledgers,
// next to what the formulas say (docs/parallel.md). The process's memory ledger counts every
// rank it drives, so per-rank figures are the process's divided by its ranks.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "report.h"

namespace dtcli {

namespace {
std::string mb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f MB", bytes / 1e6);
  return buf;
}
}  // namespace

nlohmann::json print_report(dt_mesh* mesh, int64_t params, const std::string& precision, int64_t ranks,
                            int64_t steps) {
  const double w = precision == "f32" || precision.empty() ? 4 : 2, g = w, k = w == 4 ? 8 : 12;
  const double psi = static_cast<double>(params), n = static_cast<double>(ranks);
  nlohmann::json mem = nlohmann::json::parse(read_text(
      [&](char* b, size_t c, size_t* need) { return dt_memory_report_json("cpu", b, c, need); }, "memory report"));
  std::printf("\nreport: memory per rank by tag (measured: the process's ledger / %lld ranks) and the formula\n",
              static_cast<long long>(ranks));
  std::printf("  %-12s %14s %14s %14s\n", "tag", "current", "peak", "formula");
  nlohmann::json out = {{"memory", mem}, {"ranks", ranks}, {"params", params}};
  const std::pair<const char*, double> formula[] = {{"param", w * psi}, {"grad", g * psi}, {"optimizer", k * psi}};
  for (const char* tag : {"param", "grad", "optimizer", "activation", "comm_buffer", "workspace"}) {
    const double cur = mem["tags"][tag].value("current", 0.0) / n, peak = mem["tags"][tag].value("peak", 0.0) / n;
    std::string f = "";
    for (const auto& [name, bytes] : formula)
      if (std::string(name) == tag) f = mb(bytes);
    std::printf("  %-12s %14s %14s %14s\n", tag, mb(cur).c_str(), mb(peak).c_str(), f.c_str());
  }
  std::printf("  (formula: DDP replicates the model states: weights %g, grads %g and optimizer K = %g bytes per\n"
              "   parameter x %lld parameters; the optimizer's also holds its 8-byte step counter)\n",
              w, g, k, static_cast<long long>(params));
  if (mesh) {
    nlohmann::json comm = nlohmann::json::parse(read_text(
        [&](char* b, size_t c, size_t* need) { return dt_mesh_comm_report_json(mesh, b, c, need); }, "comm report"));
    out["comm"] = comm;
    int64_t calls = 0, bytes = 0;
    double seconds = 0;
    check(dt_mesh_comm_stats(mesh, 0, "dp", "all_reduce", &calls, &bytes, &seconds), "comm stats");
    std::printf("\nreport: rank 0's all-reduce on dp over %lld steps: %lld calls, %s (%s per step; the formula:\n"
                "  the gradients, %g bytes x %lld parameters = %s, plus 8 bytes of loss), %.3f s\n",
                static_cast<long long>(steps), static_cast<long long>(calls), mb(static_cast<double>(bytes)).c_str(),
                mb(static_cast<double>(bytes) / static_cast<double>(steps > 0 ? steps : 1)).c_str(), g,
                static_cast<long long>(params), mb(g * psi).c_str(), seconds);
  }
  return out;
}

}  // namespace dtcli
