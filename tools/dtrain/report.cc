// dtrain train --report: what the run held and moved, measured by the library's ledgers,
// next to what the formulas say (docs/parallel.md). Memory is each rank's own ledger
// (dt_memory_rank_stats); traffic is rank 0's on the dp axis, in wire bytes (what a
// bandwidth-optimal algorithm moves, the volume the ZeRO paper counts).
#include <cstdio>
#include <cstring>
#include <vector>
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

const char* TrafficMeter::kind(int i) {
  static const char* const names[kKinds] = {"all_reduce", "reduce_scatter", "all_gather"};
  return names[i];
}

void TrafficMeter::read(dt_mesh* mesh, Snap& s) const {
  if (!mesh) return;
  int32_t first = 0;  // this process's first rank (under mpirun, its only one)
  check(dt_mesh_local_rank(mesh, 0, &first), "dt_mesh_local_rank");
  for (int i = 0; i < kKinds; ++i) {
    int64_t bytes = 0;
    check(dt_mesh_comm_stats(mesh, first, axis_.c_str(), kind(i), &s.calls[i], &bytes, &s.seconds[i]), "comm stats");
    check(dt_mesh_comm_wire_bytes(mesh, first, axis_.c_str(), kind(i), &s.wire[i]), "comm wire bytes");
  }
}

void TrafficMeter::after(dt_mesh* mesh) {
  Snap now;
  read(mesh, now);
  for (int i = 0; i < kKinds; ++i) {
    calls_[i] += now.calls[i] - start_.calls[i];
    wire_[i] += now.wire[i] - start_.wire[i];
    seconds_[i] += now.seconds[i] - start_.seconds[i];
  }
}

nlohmann::json print_report(dt_mesh* mesh, const TrafficMeter& traffic, int64_t params, const std::string& precision,
                            int64_t ranks, int zero, int64_t steps, const TrafficMeter* tp_traffic,
                            const nlohmann::json& tp_plan) {
  const double w = precision == "f32" || precision.empty() ? 4 : 2, g = w, k = w == 4 ? 8 : 12;
  const double psi = static_cast<double>(params), n = static_cast<double>(ranks);
  // The paper's per-rank model states at each stage: what is sharded is divided by N.
  const double f_param = zero >= 3 ? w * psi / n : w * psi, f_grad = zero >= 2 ? g * psi / n : g * psi,
               f_opt = zero >= 1 ? k * psi / n : k * psi;
  nlohmann::json out = {{"ranks", ranks}, {"params", params}, {"zero", zero}, {"per_rank", nlohmann::json::array()}};
  std::printf("\nreport: memory per rank by tag (each rank's own ledger; peak: since training began), zero = %d,\n"
              "        and the formula\n", zero);
  std::printf("  %-5s %-12s %14s %14s %14s\n", "rank", "tag", "current", "peak", "formula");
  const std::pair<const char*, dt_mem_tag> tags[] = {{"param", DT_MEM_PARAM},           {"grad", DT_MEM_GRAD},
                                                     {"optimizer", DT_MEM_OPTIMIZER},   {"activation", DT_MEM_ACTIVATION},
                                                     {"comm_buffer", DT_MEM_COMM_BUFFER}, {"workspace", DT_MEM_WORKSPACE}};
  // This process's ranks (under mpirun one; without a mesh the process is the one rank).
  std::vector<int32_t> mine = {0};
  if (mesh) {
    int32_t count = 0;
    check(dt_mesh_local_rank_count(mesh, &count), "dt_mesh_local_rank_count");
    mine.resize(static_cast<size_t>(count));
    for (int32_t i = 0; i < count; ++i) check(dt_mesh_local_rank(mesh, i, &mine[static_cast<size_t>(i)]), "dt_mesh_local_rank");
  }
  for (int32_t r : mine) {
    nlohmann::json row = {{"rank", r}};
    for (const auto& [name, tag] : tags) {
      int64_t cur = 0, peak = 0;
      if (mesh)
        check(dt_memory_rank_stats("cpu", r, tag, &cur, &peak), "rank memory stats");
      else
        check(dt_memory_stats("cpu", tag, &cur, &peak), "memory stats");
      const std::string tn = name;
      const double f = tn == "param" ? f_param : tn == "grad" ? f_grad : tn == "optimizer" ? f_opt : -1;
      row[tn] = {{"current", cur}, {"peak", peak}};
      if (f >= 0) row[tn]["formula"] = f;
      std::printf("  %-5d %-12s %14s %14s %14s\n", r, name, mb(static_cast<double>(cur)).c_str(),
                  mb(static_cast<double>(peak)).c_str(), f >= 0 ? mb(f).c_str() : "");
    }
    out["per_rank"].push_back(row);
  }
  std::printf("  (formula: weights %g, grads %g and optimizer K = %g bytes per parameter x %lld parameters, the\n"
              "   sharded ones / %lld ranks; each optimizer also holds an 8-byte step counter, and ZeRO pads each\n"
              "   unit to a multiple of the ranks)\n",
              w, g, k, static_cast<long long>(params), static_cast<long long>(ranks));
  if (mesh) {
    nlohmann::json comm = nlohmann::json::parse(read_text(
        [&](char* b, size_t c, size_t* need) { return dt_mesh_comm_report_json(mesh, b, c, need); }, "comm report"));
    out["comm"] = comm;
    const double per = static_cast<double>(steps > 0 ? steps : 1);
    std::printf("\nreport: traffic on dp per train step of this process's first rank (wire bytes: what a\n"
                "        ring algorithm moves per rank; checkpoints not counted)\n");
    double total = 0;
    for (int i = 0; i < TrafficMeter::kKinds; ++i) {
      total += static_cast<double>(traffic.wire(i));
      if (traffic.calls(i) == 0) continue;
      std::printf("  %-15s %6.1f calls %14s %8.3f s\n", TrafficMeter::kind(i), static_cast<double>(traffic.calls(i)) / per,
                  mb(static_cast<double>(traffic.wire(i)) / per).c_str(), traffic.seconds(i) / per);
    }
    // DDP and stages 1/2: 2 psi (all-reduce = reduce-scatter + all-gather); stage 3 gathers
    // every unit again for backward: 3 psi.
    const double vol = (zero == 3 ? 3.0 : 2.0) * (n - 1) / n * g * psi;
    std::printf("  %-15s %20s   formula (%s psi x (N-1)/N x %g bytes): %s\n", "total", mb(total / per).c_str(),
                zero == 3 ? "3" : "2", g, mb(vol).c_str());
    out["wire_bytes_per_step"] = total / per;
    out["wire_bytes_formula"] = vol;
  }
  if (mesh && tp_traffic && tp_plan.is_object()) {
    const double per = static_cast<double>(steps > 0 ? steps : 1);
    std::printf("\nreport: traffic on tp per train step of this process's first rank (wire bytes)\n");
    double total = 0;
    for (int i = 0; i < TrafficMeter::kKinds; ++i) {
      total += static_cast<double>(tp_traffic->wire(i));
      if (tp_traffic->calls(i) == 0) continue;
      std::printf("  %-15s %6.1f calls %14s %8.3f s\n", TrafficMeter::kind(i),
                  static_cast<double>(tp_traffic->calls(i)) / per,
                  mb(static_cast<double>(tp_traffic->wire(i)) / per).c_str(), tp_traffic->seconds(i) / per);
    }
    const nlohmann::json& t = tp_plan["tp_comm"];
    const double want = t["wire_bytes_per_step"].get<double>();
    std::printf("  %-15s %20s   formula (%s per block, the embedding, head and loss, x micro-batches): %s\n",
                "total", mb(total / per).c_str(), mb(t["wire_bytes_per_block"].get<double>()).c_str(),
                mb(want).c_str());
    out["tp_wire_bytes_per_step"] = total / per;
    out["tp_wire_bytes_formula"] = want;
    out["tp_plan"] = tp_plan;
  }
  return out;
}

void print_comm_history(dt_mesh* mesh, const std::string& dir) {
  size_t needed = 0;
  // No check(): this runs while an error is being reported, and must not throw another.
  if (!mesh || dt_mesh_comm_history_json(mesh, nullptr, 0, &needed) != DT_OK) return;
  std::string text(needed, '\0');
  if (dt_mesh_comm_history_json(mesh, text.data(), text.size(), &needed) != DT_OK) return;
  text.resize(std::strlen(text.c_str()));
  nlohmann::json h = nlohmann::json::parse(text, nullptr, false);
  if (h.is_discarded()) return;
  for (const auto& r : h["ranks"]) {
    const int rank = r["rank"].get<int>();
    const auto& calls = r["calls"];
    std::fprintf(stderr, "report: rank %d's last %zu collectives (oldest first)\n", rank, calls.size());
    std::fprintf(stderr, "  %8s %-6s %-15s %12s %10s  %s\n", "seq", "axis", "kind", "bytes", "seconds", "status");
    for (const auto& c : calls)
      std::fprintf(stderr, "  %8lld %-6s %-15s %12lld %10.3f  %s\n", c["seq"].get<long long>(),
                   c["axis"].get<std::string>().c_str(), c["kind"].get<std::string>().c_str(),
                   c["bytes"].get<long long>(), c["seconds"].get<double>(), c["status"].get<std::string>().c_str());
    nlohmann::json one = {{"backend", h["backend"]}, {"failure", h["failure"]}, {"rank", rank}, {"calls", calls}};
    const std::string path = dir + "/comm_history.rank" + std::to_string(rank) + ".json";
    if (std::FILE* f = std::fopen(path.c_str(), "w")) {
      std::fputs((one.dump(2) + "\n").c_str(), f);
      std::fclose(f);
      std::fprintf(stderr, "report: wrote %s\n", path.c_str());
    }
  }
}

FailureReport::~FailureReport() {
  if (enabled_ && std::uncaught_exceptions() > exceptions_) print_comm_history(mesh_, dir_);
}

}  // namespace dtcli
