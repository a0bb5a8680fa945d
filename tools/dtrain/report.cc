// dtrain train --report: what the run held and moved, measured by the library's ledgers,
// next to what the formulas say (docs/parallel.md). Memory is each rank's own ledger
// (dt_memory_rank_stats); traffic is rank 0's on each group it crosses, in wire bytes (what a
// bandwidth-optimal algorithm moves, the volume the ZeRO paper counts).
#include <algorithm>
#include <cmath>
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

// A meter's rows per train step (`per` steps measured), one per collective kind it saw, after
// `indent`.
void print_kinds(const TrafficMeter& m, double per, const char* indent) {
  for (int i = 0; i < TrafficMeter::kKinds; ++i)
    if (m.calls(i) > 0)
      std::printf("%s%-15s %6.1f calls %14s %8.3f s\n", indent, TrafficMeter::kind(i),
                  static_cast<double>(m.calls(i)) / per, mb(static_cast<double>(m.wire(i)) / per).c_str(),
                  m.seconds(i) / per);
}
}  // namespace

// A rank's pipeline stage (its coordinate on pp); 0 without a mesh.
int pp_stage_of(dt_mesh* mesh, int32_t rank) {
  int32_t c = 0;
  if (mesh) check(dt_mesh_coord(mesh, rank, "pp", &c), "dt_mesh_coord");
  return c;
}

// This process's ranks (under mpirun one; without a mesh the process is the one rank).
std::vector<int32_t> local_ranks(dt_mesh* mesh) {
  std::vector<int32_t> mine = {0};
  if (!mesh) return mine;
  int32_t count = 0;
  check(dt_mesh_local_rank_count(mesh, &count), "dt_mesh_local_rank_count");
  mine.resize(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) check(dt_mesh_local_rank(mesh, i, &mine[static_cast<size_t>(i)]), "dt_mesh_local_rank");
  return mine;
}

namespace {
// The ledger's tags as --report names them (all: the peak of the sum).
const std::pair<const char*, dt_mem_tag> kTags[] = {
    {"param", DT_MEM_PARAM},           {"grad", DT_MEM_GRAD},           {"optimizer", DT_MEM_OPTIMIZER},
    {"activation", DT_MEM_ACTIVATION}, {"comm_buffer", DT_MEM_COMM_BUFFER}, {"workspace", DT_MEM_WORKSPACE},
    {"checkpoint", DT_MEM_CHECKPOINT}, {"all", DT_MEM_ALL}};

// Rank r's current and peak bytes under `tag` (its own ledger on a mesh, else the process's).
std::pair<int64_t, int64_t> rank_memory(dt_mesh* mesh, int32_t r, dt_mem_tag tag) {
  int64_t cur = 0, peak = 0;
  if (mesh)
    check(dt_memory_rank_stats("cpu", r, tag, &cur, &peak), "rank memory stats");
  else
    check(dt_memory_stats("cpu", tag, &cur, &peak), "memory stats");
  return {cur, peak};
}
}  // namespace

nlohmann::json rank_peaks(dt_mesh* mesh) {
  nlohmann::json out = nlohmann::json::object();
  for (int32_t r : local_ranks(mesh)) {
    nlohmann::json& row = out[std::to_string(r)];
    for (const auto& [name, tag] : kTags) row[name] = rank_memory(mesh, r, tag).second;
  }
  return out;
}

nlohmann::json print_report(dt_mesh* mesh, const GradTraffic& traffic, const nlohmann::json& plan, int zero,
                            int64_t steps, const TrafficMeter* tp_traffic, const nlohmann::json& pipeline) {
  // The formulas are the library's plan's (engine/plan.cc, one formula for plan, report and
  // the cost model): the paper's per-rank model states at this ZeRO stage over the
  // parameters the rank holds (with a pipeline its stage's), and the last stage's tied copy
  // of the token table, weights and a gradient, whole at every ZeRO stage.
  const nlohmann::json& bpp = plan["bytes_per_param"];
  const double w = bpp["weights"].get<double>(), g = bpp["grads"].get<double>(), k = bpp["optimizer"].get<double>();
  // ZeRO's shards (dp x cp, under ep dp) over the parameters a rank holds (its tp part, less
  // the other ep ranks' experts).
  const int64_t ranks = plan["zero_ranks"].get<int64_t>();
  const auto params = static_cast<int64_t>(std::llround(plan["params_per_rank"].get<double>()));
  const bool tp_split = plan["tp"].get<int64_t>() > 1;
  struct Formula {
    double param, grad, opt;
  };
  // A rank's part in the plan: its pipeline stage's entry, or the plan itself.
  auto part_of = [&](int32_t rank) -> const nlohmann::json& {
    return pipeline.is_object() ? pipeline["stages"][static_cast<size_t>(pp_stage_of(mesh, rank))] : plan;
  };
  auto formula = [&](int32_t rank) {
    const nlohmann::json& part = part_of(rank);
    const nlohmann::json& st = part["stages"][static_cast<size_t>(zero)];
    const double copy = part.value("tied_copy_params", 0.0);
    return Formula{st["weights_bytes"].get<double>() + w * copy, st["grads_bytes"].get<double>() + g * copy,
                   st["optimizer_bytes"].get<double>()};
  };
  // The traffic formulas are this process's first rank's (with a pipeline its stage's).
  int32_t first = 0;
  if (mesh) check(dt_mesh_local_rank(mesh, 0, &first), "dt_mesh_local_rank");
  nlohmann::json out = {{"ranks", ranks}, {"params", params}, {"zero", zero}, {"per_rank", nlohmann::json::array()}};
  std::printf("\nreport: memory per rank by tag (each rank's own ledger; peak: since training began), zero = %d,\n"
              "        and the formula\n", zero);
  std::printf("  %-5s %-12s %14s %14s %14s\n", "rank", "tag", "current", "peak", "formula");
  for (int32_t r : local_ranks(mesh)) {
    nlohmann::json row = {{"rank", r}};
    const Formula fr = formula(r);
    const double f_param = fr.param, f_grad = fr.grad, f_opt = fr.opt;
    if (pipeline.is_object()) row["pp_stage"] = pp_stage_of(mesh, r);
    for (const auto& [name, tag] : kTags) {
      const auto [cur, peak] = rank_memory(mesh, r, tag);
      const std::string tn = name;
      const double f = tn == "param" ? f_param : tn == "grad" ? f_grad : tn == "optimizer" ? f_opt : -1;
      row[tn] = {{"current", cur}, {"peak", peak}};
      if (f >= 0) row[tn]["formula"] = f;
      std::printf("  %-5d %-12s %14s %14s %14s\n", r, name, mb(static_cast<double>(cur)).c_str(),
                  mb(static_cast<double>(peak)).c_str(), f >= 0 ? mb(f).c_str() : "");
    }
    out["per_rank"].push_back(row);
  }
  if (pipeline.is_object())
    std::printf("  (formula: weights %g, grads %g and optimizer K = %g bytes per parameter x the parameters of the\n"
                "   rank's pipeline stage, the sharded ones / %lld ranks, and the last stage's tied copy of the token\n"
                "   table; each optimizer also holds an 8-byte step counter, and ZeRO pads each unit)\n",
                w, g, k, static_cast<long long>(ranks));
  else
    std::printf("  (formula: weights %g, grads %g and optimizer K = %g bytes per parameter x %lld parameters, the\n"
                "   sharded ones / %lld ranks; each optimizer also holds an 8-byte step counter, and ZeRO pads each\n"
                "   unit to a multiple of the ranks)\n",
                w, g, k, static_cast<long long>(params), static_cast<long long>(ranks));
  if (mesh) {
    nlohmann::json comm = nlohmann::json::parse(read_text(
        [&](char* b, size_t c, size_t* need) { return dt_mesh_comm_report_json(mesh, b, c, need); }, "comm report"));
    out["comm"] = comm;
    const double per = static_cast<double>(steps > 0 ? steps : 1);
    std::printf("\nreport: gradient traffic per train step of this process's first rank, by group (wire bytes:\n"
                "        what a ring algorithm moves per rank; checkpoints not counted)\n");
    const nlohmann::json& stage = part_of(first)["stages"][static_cast<size_t>(zero)];
    const nlohmann::json& want = stage["grad_wire_bytes_per_step_by_axis"];
    const double total_want = stage["dp_wire_bytes_per_step"].get<double>();  // the groups' sum
    double total = 0;
    nlohmann::json by_axis = nlohmann::json::object();
    for (const auto& [axis, meter] : traffic.axes()) {
      const double got = meter.wire_total() / per, f = want.value(axis, 0.0);
      if (got == 0 && f == 0) continue;  // a group another pipeline stage's formula names
      std::printf("  on %s\n", axis.c_str());
      print_kinds(meter, per, "    ");
      std::printf("    %-15s %20s   formula %s\n", "total", mb(got).c_str(), mb(f).c_str());
      by_axis[axis] = {{"measured", got}, {"formula", f}};
      total += got;
    }
    // engine/plan.cc's formulas: DDP 2 psi (N-1)/N once a step; ZeRO psi (N-1)/N per
    // reduce-scatter or gather, 2 of them at stage 1, M + 1 at stage 2, 3 M at stage 3.
    std::printf("  %-17s %20s   formula %s (psi x (N-1)/N x %g bytes: DDP 2, ZeRO-1 2, ZeRO-2 M+1, ZeRO-3 3M;\n"
                "  under ep the experts' gradients over dp, the rest over dp x ep, with ZeRO first all-reduced "
                "over ep)\n",
                "all groups", mb(total).c_str(), mb(total_want).c_str(), g);
    out["wire_bytes_per_step"] = total;
    out["wire_bytes_formula"] = total_want;
    out["wire_bytes_by_axis"] = by_axis;
  }
  if (mesh && tp_traffic && tp_split) {
    const double per = static_cast<double>(steps > 0 ? steps : 1);
    std::printf("\nreport: traffic on tp per train step of this process's first rank (wire bytes)\n");
    print_kinds(*tp_traffic, per, "  ");
    const double total = tp_traffic->wire_total();
    const nlohmann::json& t = plan["tp_comm"];
    // With a pipeline the first rank's stage: its blocks, and the embedding or the head.
    const double want = pipeline.is_object() ? part_of(first)["tp_wire_bytes_per_step"].get<double>()
                                             : t["wire_bytes_per_step"].get<double>();
    std::printf("  %-15s %20s   formula (%s per block, the embedding, head and loss%s, x micro-batches): %s\n",
                "total", mb(total / per).c_str(), mb(t["wire_bytes_per_block"].get<double>()).c_str(),
                pipeline.is_object() ? " of its pipeline stage" : "", mb(want).c_str());
    out["tp_wire_bytes_per_step"] = total / per;
    out["tp_wire_bytes_formula"] = want;
    out["tp_plan"] = plan;
  }
  return out;
}

std::string blocks_text(const nlohmann::json& chunks) {
  std::string s;
  for (const auto& c : chunks) {
    const int b = c[0].get<int>(), e = c[1].get<int>();
    s += (s.empty() ? "" : ",") + std::to_string(b) + (e - b > 1 ? "-" + std::to_string(e - 1) : "");
  }
  return s;
}

void PipeMeter::add_step(const std::string& stats_json) {
  const nlohmann::json j = nlohmann::json::parse(stats_json, nullptr, false);
  if (!j.is_object() || !j.contains("pipeline")) return;
  const nlohmann::json& p = j["pipeline"];
  ++steps_;
  bubble_sum_ += p["bubble_fraction"].get<double>();
  const auto peaks = p["stage_activation_peak"].get<std::vector<int>>();
  const auto busy = p["stage_busy_s"].get<std::vector<double>>();
  peaks_.resize(peaks.size(), 0);
  busy_sum_.resize(busy.size(), 0.0);
  for (size_t s = 0; s < peaks.size(); ++s) peaks_[s] = std::max(peaks_[s], peaks[s]);
  for (size_t s = 0; s < busy.size(); ++s) busy_sum_[s] += busy[s];
}

void MoeMeter::add_step(const std::string& stats_json) {
  const nlohmann::json j = nlohmann::json::parse(stats_json, nullptr, false);
  if (!j.is_object() || !j.contains("moe")) return;
  const nlohmann::json& m = j["moe"];
  ++steps_;
  const auto tokens = m["tokens_per_expert"].get<std::vector<int64_t>>();
  tokens_.resize(tokens.size(), 0);
  for (size_t e = 0; e < tokens.size(); ++e) tokens_[e] += tokens[e];
  dropped_ += m["dropped"].get<int64_t>();
  aux_ += m["aux_loss"].get<double>();
  z_ += m["z_loss"].get<double>();
  a2a_ += m.value("all_to_all_bytes", 0.0);
  a2a_uniform_ += m.value("all_to_all_bytes_uniform", 0.0);
  add_blocks(m);
}

void MoeMeter::add_blocks(const nlohmann::json& m) {
  // The busiest ep rank's rows, block by block. Time: each block's ranks wait for its busiest
  // at the all-to-all, so a step's pace is the sum over blocks of the busiest rank's rows.
  // Memory: a rank's experts' activations are sized per block and grown, never shrunk
  // (nn/moe.h), so it holds the sum over blocks of each block's most rows so far.
  if (!m.contains("tokens_per_block_expert")) return;
  const int64_t E = static_cast<int64_t>(tokens_.size());
  const auto blocks = m["tokens_per_block_expert"].get<std::vector<std::vector<int64_t>>>();
  for (const auto& b : blocks)
    if (b.size() != static_cast<size_t>(E)) return;  // not this meter's experts: nothing to add
  for (int64_t ep = 2; ep <= E; ++ep) {
    if (E % ep != 0) continue;
    std::vector<int64_t>& most = most_rows_[ep];  // [block x ep]: the most each group's experts received
    most.resize(blocks.size() * static_cast<size_t>(ep), 0);
    double pace = 0, all = 0;
    for (size_t b = 0; b < blocks.size(); ++b) {
      int64_t busiest = 0;
      for (int64_t g = 0; g < ep; ++g) {
        int64_t rows = 0;
        for (int64_t e = g * (E / ep); e < (g + 1) * (E / ep); ++e) rows += blocks[b][static_cast<size_t>(e)];
        int64_t& slot = most[b * static_cast<size_t>(ep) + static_cast<size_t>(g)];
        slot = std::max(slot, rows);
        busiest = std::max(busiest, rows);
        all += static_cast<double>(rows);
      }
      pace += static_cast<double>(busiest);
    }
    if (all > 0) step_load_[ep].push_back(pace * static_cast<double>(ep) / all);
  }
  for (size_t b = 0; b < blocks.size(); ++b) {
    int64_t rows = 0;
    for (int64_t t : blocks[b]) rows += t;
    most_block_rows_.resize(blocks.size(), 0);
    most_block_rows_[b] = std::max(most_block_rows_[b], rows);
  }
}

nlohmann::json MoeMeter::print() const {
  int64_t kept = 0, most = 0;
  for (int64_t t : tokens_) kept += t, most = std::max(most, t);
  const double mean = tokens_.empty() ? 0.0 : static_cast<double>(kept) / static_cast<double>(tokens_.size());
  const double routed = static_cast<double>(kept + dropped_), steps = static_cast<double>(steps_);
  std::printf("\nreport: mixture of experts, %zu experts, %lld steps (every block's routing summed)\n", tokens_.size(),
              static_cast<long long>(steps_));
  std::printf("  tokens per expert:");
  for (int64_t t : tokens_) std::printf(" %lld", static_cast<long long>(t));
  std::printf("\n  balance: busiest expert %.2fx the mean; dropped %lld of %.0f choices (%.2f%%)\n",
              mean > 0 ? static_cast<double>(most) / mean : 0.0, static_cast<long long>(dropped_), routed,
              routed > 0 ? 100.0 * static_cast<double>(dropped_) / routed : 0.0);
  std::printf("  auxiliary losses per step: load balancing %.5f, router z %.5f\n", aux_ / steps, z_ / steps);
  nlohmann::json by_ep = nlohmann::json::object();
  if (!most_rows_.empty()) {
    // Each group's blocks' most rows summed, the busiest group's over an even share of every
    // block's most rows.
    double even = 0;
    for (int64_t r : most_block_rows_) even += static_cast<double>(r);
    std::printf("  busiest ep rank's expert rows over an even share, a typical step's (the median; dtrain plan "
                "--expert-load) and each block at its most (--expert-load-peak):");
    for (const auto& [ep, group_most] : most_rows_) {
      int64_t busiest = 0;
      for (int64_t g = 0; g < ep; ++g) {
        int64_t sum = 0;
        for (size_t i = static_cast<size_t>(g); i < group_most.size(); i += static_cast<size_t>(ep)) sum += group_most[i];
        busiest = std::max(busiest, sum);
      }
      const double peak = even > 0 ? static_cast<double>(busiest) * static_cast<double>(ep) / even : 1.0;
      std::vector<double> loads = step_load_.count(ep) ? step_load_.at(ep) : std::vector<double>{1.0};
      std::sort(loads.begin(), loads.end());
      const size_t n = loads.size();
      const double typical = n % 2 ? loads[n / 2] : 0.5 * (loads[n / 2 - 1] + loads[n / 2]);
      std::printf("%s ep %lld %.3fx, %.3fx", ep == most_rows_.begin()->first ? "" : ";", static_cast<long long>(ep),
                  typical, peak);
      by_ep[std::to_string(ep)] = {{"typical_step", typical}, {"peak", peak}};
    }
    std::printf("\n");
  }
  nlohmann::json a2a;
  if (a2a_ > 0) {
    std::printf("  all-to-all per step, every ep rank's sends summed (counts, then rows: dispatch and combine, forward "
                "and backward): %s; formula for a router sending each expert as many rows, counts + 4 R k (ep-1)/ep "
                "rows x d_model x dtype bytes per block: %s (%.2fx)\n",
                mb(a2a_ / steps).c_str(), mb(a2a_uniform_ / steps).c_str(), a2a_uniform_ > 0 ? a2a_ / a2a_uniform_ : 0.0);
    a2a = {{"all_to_all_bytes_per_step", a2a_ / steps}, {"all_to_all_bytes_per_step_uniform", a2a_uniform_ / steps}};
  }
  nlohmann::json out = {{"tokens_per_expert", tokens_},
          {"busiest_over_mean", mean > 0 ? static_cast<double>(most) / mean : 0.0},
          {"dropped", dropped_},
          {"choices", routed},
          {"aux_loss_per_step", aux_ / steps},
          {"z_loss_per_step", z_ / steps},
          {"busiest_rank_over_even_by_ep", by_ep}};
  if (!a2a.is_null()) out.update(a2a);
  return out;
}

int64_t first_rank_sent(dt_mesh* mesh, const char* axis) {
  int32_t first = 0;
  int64_t bytes = 0;
  if (!mesh) return 0;
  check(dt_mesh_local_rank(mesh, 0, &first), "dt_mesh_local_rank");
  check(dt_mesh_comm_stats(mesh, first, axis, "send", nullptr, &bytes, nullptr), std::string("comm stats (") + axis + " send)");
  return bytes;
}

int64_t PipeMeter::sent(dt_mesh* mesh) { return first_rank_sent(mesh, "pp"); }

nlohmann::json print_pipeline_report(dt_mesh* mesh, const PipeMeter& meter, const nlohmann::json& p) {
  const std::string name = p["schedule"].get<std::string>();
  const double measured = meter.mean_bubble(), simulated = p["bubble_fraction"].get<double>(),
               formula = p["bubble_formula"].get<double>();
  std::printf("\nreport: pipeline %s over pp = %d, M = %d micro-batches%s per step\n", name.c_str(), p["P"].get<int>(),
              p["M"].get<int>(), p["v"].get<int>() > 1 ? (", v = " + std::to_string(p["v"].get<int>())).c_str() : "");
  std::printf("  bubble: measured %.1f%% (mean over %lld steps), simulated %.1f%%, formula %.1f%%\n", 100.0 * measured,
              static_cast<long long>(meter.steps()), 100.0 * simulated, 100.0 * formula);
  const auto sim_peaks = p["activation_peak"].get<std::vector<int>>();
  std::printf("  %-6s %-10s %28s %28s\n", "stage", "blocks", "activation peak measured", "simulated");
  nlohmann::json stages = nlohmann::json::array();
  for (size_t s = 0; s < sim_peaks.size(); ++s) {
    const int got = s < meter.peaks().size() ? meter.peaks()[s] : -1;
    const double busy = s < meter.busy_s().size() && meter.steps() ? meter.busy_s()[s] / static_cast<double>(meter.steps()) : 0.0;
    const std::string blocks = blocks_text(p["stages"][s]["chunks"]);
    std::printf("  %-6zu %-10s %28d %28d\n", s, blocks.c_str(), got, sim_peaks[s]);
    stages.push_back({{"stage", s}, {"activation_peak", got}, {"activation_peak_simulated", sim_peaks[s]},
                      {"busy_s_per_step", busy}});
  }
  std::printf("  (activation peaks: the most micro-batches%s whose activations a stage held at once)\n",
              p["v"].get<int>() > 1 ? " x chunks" : "");
  nlohmann::json out = {{"schedule", name},          {"P", p["P"]},
                        {"M", p["M"]},               {"v", p["v"]},
                        {"steps", meter.steps()},    {"bubble_measured", measured},
                        {"bubble_simulated", simulated}, {"bubble_formula", formula},
                        {"stages", stages}};
  if (mesh && meter.steps() > 0) {
    int32_t first = 0;
    check(dt_mesh_local_rank(mesh, 0, &first), "dt_mesh_local_rank");
    const double got = static_cast<double>(meter.sent_bytes()) / static_cast<double>(meter.steps());
    const double want = p["pp_send_bytes_per_step"][static_cast<size_t>(pp_stage_of(mesh, first))].get<double>();
    std::printf("  pp bytes sent per step by this process's first rank: %s, plan %s\n", mb(got).c_str(), mb(want).c_str());
    out["pp_send_bytes_per_step"] = got;
    out["pp_send_bytes_per_step_plan"] = want;
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
