// dtrain train --report's traffic meters: rank 0's bytes per collective kind on one mesh
// group, read around each train step, and the set of groups the plan's gradient formula
// names (report.h).
#include <nlohmann/json.hpp>

#include "report.h"

namespace dtcli {

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

GradTraffic::GradTraffic(const nlohmann::json& plan, const nlohmann::json& pipeline, int zero) {
  auto add = [&](const nlohmann::json& part) {
    for (const auto& [axis, bytes] : part["stages"][static_cast<size_t>(zero)]["grad_wire_bytes_per_step_by_axis"].items())
      axes_.emplace(axis, TrafficMeter(axis));
  };
  if (pipeline.is_object())
    for (const nlohmann::json& stage : pipeline["stages"]) add(stage);  // the first rank's stage is one of them
  else if (plan.is_object())  // (none without --report)
    add(plan);
}

void GradTraffic::before(dt_mesh* mesh) {
  for (auto& [axis, meter] : axes_) meter.before(mesh);
}

void GradTraffic::after(dt_mesh* mesh) {
  for (auto& [axis, meter] : axes_) meter.after(mesh);
}

}  // namespace dtcli
