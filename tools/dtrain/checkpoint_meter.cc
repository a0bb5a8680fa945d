#include "checkpoint_meter.h"

#include <algorithm>
#include <cstdio>

#include "cli.h"
#include "flags.h"

namespace dtcli {
namespace {

nlohmann::json info_of(const std::string& stem) {
  return nlohmann::json::parse(read_text(
      [&](char* buf, size_t cap, size_t* need) { return dt_checkpoint_info_json(stem.c_str(), buf, cap, need); },
      "dt_checkpoint_info_json"));
}

// The bytes in all and the largest writer's (a save's wall time is the slowest writer's).
std::pair<double, double> bytes_of(const nlohmann::json& info) {
  double all = 0, largest = 0;
  for (const nlohmann::json& f : info["files"]) {
    all += f["bytes"].get<double>();
    largest = std::max(largest, f["bytes"].get<double>());
  }
  return {all, largest};
}

}  // namespace

void CheckpointMeter::save() {
  const double t = now_seconds();
  check(dt_engine_save(engine_, stem_.c_str()), "saving the checkpoint");
  last_save_s_ = now_seconds() - t;
  save_s_ += last_save_s_;
  ++saves_;
  last_ = info_of(stem_);
}

void CheckpointMeter::save_async() {
  const double t = now_seconds();
  check(dt_engine_save_async(engine_, stem_.c_str()), "saving the checkpoint (asynchronously)");
  stall_s_ += now_seconds() - t;
  ++async_saves_;
}

void CheckpointMeter::load() {
  const double t = now_seconds();
  check(dt_engine_load(engine_, stem_.c_str()), "resuming from the run's checkpoint");
  load_s_ = now_seconds() - t;
  loaded_ = info_of(stem_);
}

nlohmann::json CheckpointMeter::json() const {
  nlohmann::json j = nlohmann::json::object();
  if (saves_ > 0) {
    const auto [all, largest] = bytes_of(last_);
    j["saves"] = saves_;
    j["save_seconds"] = save_s_;
    j["last_save_seconds"] = last_save_s_;
    j["bytes"] = all;
    j["files"] = last_["files"].size();
    j["largest_file_bytes"] = largest;
    j["write_bytes_per_s"] = last_save_s_ > 0 ? all / last_save_s_ : 0.0;
    j["write_bytes_per_s_per_writer"] = last_save_s_ > 0 ? largest / last_save_s_ : 0.0;
  }
  if (async_saves_ > 0) {
    j["async_saves"] = async_saves_;
    j["async_stall_seconds"] = stall_s_;  // the time the asynchronous saves held training
    j["async_stall_seconds_each"] = stall_s_ / async_saves_;
  }
  if (load_s_ >= 0) {
    const auto [all, largest] = bytes_of(loaded_);
    j["load_seconds"] = load_s_;
    j["loaded_bytes"] = all;
    j["loaded_files"] = loaded_["files"].size();
    j["read_bytes_per_s"] = load_s_ > 0 ? all / load_s_ : 0.0;
  }
  return j;
}

void CheckpointMeter::print() const {
  const nlohmann::json j = json();
  if (j.contains("saves"))
    std::printf("  checkpoint: %d save(s), the last %.3f s: %s in %zu file(s) (the largest writer %s), %s/s in all, "
                "%s/s for the largest writer\n",
                saves_, last_save_s_, format_bytes(j["bytes"].get<double>()).c_str(), j["files"].get<size_t>(),
                format_bytes(j["largest_file_bytes"].get<double>()).c_str(),
                format_bytes(j["write_bytes_per_s"].get<double>()).c_str(),
                format_bytes(j["write_bytes_per_s_per_writer"].get<double>()).c_str());
  if (j.contains("async_saves"))
    std::printf("  asynchronous saves: %d, each held training %.4f s (staging the state; the files written meanwhile)%s\n",
                async_saves_, stall_s_ / async_saves_,
                saves_ > 0 ? (", against " + std::to_string(last_save_s_) + " s for the last, synchronous save").c_str() : "");
  if (j.contains("load_seconds"))
    std::printf("  resume: read %s from %zu file(s) in %.3f s (%s/s)\n", format_bytes(j["loaded_bytes"].get<double>()).c_str(),
                j["loaded_files"].get<size_t>(), load_s_, format_bytes(j["read_bytes_per_s"].get<double>()).c_str());
}

}  // namespace dtcli
