// dtrain train --report (report.cc).
#pragma once
#include <exception>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli.h"

namespace dtcli {

// Rank 0's traffic on one mesh axis (dp, tp, "dp*ep", ...) during train steps only (checkpoints gather
// too, at stage 3): read around each step.
class TrafficMeter {
 public:
  static constexpr int kKinds = 3;  // all_reduce, reduce_scatter, all_gather
  explicit TrafficMeter(std::string axis = "dp") : axis_(std::move(axis)) {}
  static const char* kind(int i);
  void before(dt_mesh* mesh) { read(mesh, start_); }
  void after(dt_mesh* mesh);
  int64_t calls(int i) const { return calls_[i]; }
  int64_t wire(int i) const { return wire_[i]; }
  double wire_total() const {  // every kind's wire bytes
    double s = 0;
    for (int64_t w : wire_) s += static_cast<double>(w);
    return s;
  }
  double seconds(int i) const { return seconds_[i]; }

 private:
  struct Snap {
    int64_t calls[kKinds] = {}, wire[kKinds] = {};
    double seconds[kKinds] = {};
  };
  void read(dt_mesh* mesh, Snap& s) const;
  std::string axis_;
  Snap start_;
  int64_t calls_[kKinds] = {}, wire_[kKinds] = {};
  double seconds_[kKinds] = {};
};

// Rank 0's gradient traffic (and ZeRO's weight gathers) during train steps, on every group
// the plan's formula at ZeRO stage `zero` names ("grad_wire_bytes_per_step_by_axis"): dp;
// under ep dp x ep, dp and ep; under cp dp x cp. The groups are the plan's, so the meters
// and the formulas cannot name different ones.
class GradTraffic {
 public:
  // plan and pipeline: as print_report takes them.
  GradTraffic(const nlohmann::json& plan, const nlohmann::json& pipeline, int zero);
  void before(dt_mesh* mesh);
  void after(dt_mesh* mesh);
  const std::map<std::string, TrafficMeter>& axes() const { return axes_; }

 private:
  std::map<std::string, TrafficMeter> axes_;
};

// Prints each rank's memory ledger next to the model-state formulas of ZeRO stage `zero`
// (0 = DDP) from the run's plan (`plan`: dt_plan_json for its dp, tp, pp, ep and cp, without
// its "pipeline" entry: the per-rank states over the parameters each rank's part holds) and,
// with a mesh, rank 0's gradient traffic per collective on each group next to the plan's
// volume; with tp > 1 also its traffic on tp next to the plan's per step. With a pipeline
// (pipeline: the plan's "pipeline" entry) each rank's part is its stage's, so the formulas
// are its stage's (and the last stage's tied copy). Returns all of it as JSON.
nlohmann::json print_report(dt_mesh* mesh, const GradTraffic& traffic, const nlohmann::json& plan, int zero,
                            int64_t steps, const TrafficMeter* tp_traffic = nullptr,
                            const nlohmann::json& pipeline = nlohmann::json());

// Each of this process's ranks' peaks so far by ledger tag: {"<rank>": {"param": peak, "grad",
// "optimizer", "activation", "comm_buffer", "workspace", "checkpoint", "all"}} (each tag's own
// peak; "all" the peak of the sum). dtrain train takes it after the last step and before the
// final save, the training's own peaks, which the planner predicts (bench/bench_plan.py).
nlohmann::json rank_peaks(dt_mesh* mesh);

// --report with a pipeline: what the steps measured, from each step's stats JSON
// (dt_engine_last_stats_json's "pipeline": the step's bubble and each stage's live
// activations), and the bytes the process's first rank sent on pp during train steps.
class PipeMeter {
 public:
  void add_step(const std::string& stats_json);
  void before(dt_mesh* mesh) { sent_start_ = sent(mesh); }
  void after(dt_mesh* mesh) { sent_ += sent(mesh) - sent_start_; }
  int64_t steps() const { return steps_; }
  double mean_bubble() const { return steps_ ? bubble_sum_ / static_cast<double>(steps_) : 0.0; }
  const std::vector<int>& peaks() const { return peaks_; }            // per stage, the most over the steps
  const std::vector<double>& busy_s() const { return busy_sum_; }     // per stage, summed over the steps
  int64_t sent_bytes() const { return sent_; }

 private:
  static int64_t sent(dt_mesh* mesh);
  int64_t steps_ = 0, sent_ = 0, sent_start_ = 0;
  double bubble_sum_ = 0.0;
  std::vector<int> peaks_;
  std::vector<double> busy_sum_;
};

// The bytes the process's first rank has sent point to point on `axis` (0 without a mesh).
int64_t first_rank_sent(dt_mesh* mesh, const char* axis);

// --report with context parallelism: the bytes the process's first rank sent round the cp
// ring during train steps, and each local rank's activation peak (its own ledger), next to
// the plan's formulas (cp_plan: dt_plan_json's "cp" for this run's micro-batch). pp > 1: the
// ring formula is for the whole model (a rank's share is its stage's blocks').
class CpMeter {
 public:
  void before(dt_mesh* mesh) { start_ = sent(mesh); }
  void after(dt_mesh* mesh, int64_t steps) { sent_ += sent(mesh) - start_, steps_ += steps; }
  nlohmann::json print(dt_mesh* mesh, const nlohmann::json& cp_plan) const;

 private:
  static int64_t sent(dt_mesh* mesh);
  int64_t start_ = 0, sent_ = 0, steps_ = 0;
};

// --report for a mixture of experts: each step's routing (the stats line's "moe") summed.
class MoeMeter {
 public:
  void add_step(const std::string& stats_json);
  bool any() const { return steps_ > 0; }
  // Prints tokens per expert over the steps (every block), the balance, the drops, the
  // auxiliary losses and, for each ep the experts divide by, the busiest ep rank's rows over
  // an even share at the worst step (what dtrain plan --expert-load takes); returns them as JSON.
  nlohmann::json print() const;

 private:
  int64_t steps_ = 0, dropped_ = 0;
  std::vector<int64_t> tokens_;
  // ep (ranks holding E / ep consecutive experts each) -> per block and ep rank, the most rows
  // its experts received in a step; and per block the most rows of all. Every layout routes
  // the same tokens alike, so one rank's run measures them for every ep.
  std::map<int64_t, std::vector<int64_t>> most_rows_;
  std::vector<int64_t> most_block_rows_;
  std::map<int64_t, std::vector<double>> step_load_;  // ep -> each step's busiest rank per block, over an even share
  void add_blocks(const nlohmann::json& moe);  // a step's tokens_per_block_expert into the two above
  double aux_ = 0, z_ = 0, a2a_ = 0, a2a_uniform_ = 0;
};

// A pipeline rank's blocks from the plan's "chunks" ([[begin, end], ...]): "0-2" for
// blocks 0 to 2, "3" for one, "0-1,4-5" for an interleaved rank's chunks.
std::string blocks_text(const nlohmann::json& chunks);

// Prints the measured bubble (mean over the steps) next to the schedule's formula and the
// simulated one, each stage's measured activation peak next to the simulator's, and the
// first rank's pp bytes sent per step next to the plan's. pipeline: the plan's entry.
nlohmann::json print_pipeline_report(dt_mesh* mesh, const PipeMeter& meter, const nlohmann::json& pipeline);

// Hang forensics for --report when a run fails: prints each local rank's last collectives
// (dt_mesh_comm_history_json: seq, axis, kind, bytes, seconds, how each ended) to stderr,
// which every rank of mpirun keeps, and writes the JSON to `dir`/comm_history.rankR.json.
void print_comm_history(dt_mesh* mesh, const std::string& dir);

// Calls print_comm_history when the scope it guards is left by an exception (a failed
// step, save or timeout): make one right after the mesh and the run directory exist.
class FailureReport {
 public:
  FailureReport(dt_mesh* mesh, bool enabled, std::string dir)
      : mesh_(mesh), enabled_(enabled && mesh), dir_(std::move(dir)), exceptions_(std::uncaught_exceptions()) {}
  ~FailureReport();
  FailureReport(const FailureReport&) = delete;
  FailureReport& operator=(const FailureReport&) = delete;

 private:
  dt_mesh* mesh_;
  bool enabled_;
  std::string dir_;
  int exceptions_;  // in flight when made: more at destruction means an unwind
};

}  // namespace dtcli
