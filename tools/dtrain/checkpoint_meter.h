// dtrain train's checkpoints of one engine at one path stem: saves and the resume, each
// timed, with what the files hold (dt_checkpoint_info_json: bytes per writer) and the
// bandwidth, in all and per writing rank. The run's --json holds them ("checkpoint_io");
// --report prints them.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "dtrain/dtrain.h"

namespace dtcli {

class CheckpointMeter {
 public:
  CheckpointMeter(dt_engine* engine, std::string stem) : engine_(engine), stem_(std::move(stem)) {}
  void save();        // dt_engine_save
  void save_async();  // dt_engine_save_async: its time is the stall
  void load();        // dt_engine_load (the resume)
  bool any() const { return saves_ > 0 || load_s_ >= 0 || async_saves_ > 0; }
  nlohmann::json json() const;
  void print() const;

 private:
  dt_engine* engine_;
  std::string stem_;
  int saves_ = 0, async_saves_ = 0;
  double save_s_ = 0, last_save_s_ = 0, load_s_ = -1, stall_s_ = 0;
  nlohmann::json last_, loaded_;  // the info of the last save's checkpoint, of the one loaded
};

}  // namespace dtcli
