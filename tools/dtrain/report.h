// dtrain train --report (report.cc).
#pragma once
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include "cli.h"

namespace dtcli {

// Rank 0's traffic on one mesh axis (dp, or tp) during train steps only (checkpoints gather
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

// Prints each rank's memory ledger next to the model-state formulas of ZeRO stage `zero`
// (0 = DDP) over the `params` each rank's model part holds and, with a mesh, rank 0's
// traffic per collective on dp next to the paper's volume; with tp > 1 (tp_plan: the
// library's plan, dt_plan_json) also its traffic on tp next to the plan's per step.
// Returns all of it as JSON.
nlohmann::json print_report(dt_mesh* mesh, const TrafficMeter& traffic, int64_t params, const std::string& precision,
                            int64_t ranks, int zero, int64_t steps, const TrafficMeter* tp_traffic = nullptr,
                            const nlohmann::json& tp_plan = nlohmann::json());

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
