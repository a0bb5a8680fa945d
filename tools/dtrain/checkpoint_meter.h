// dtrain train's checkpoint figures: each save's and the resume's wall time, what the files
// hold (dt_checkpoint_info_json: bytes per writer), and the bandwidth, in all and per writing
// rank. The run's --json holds them ("checkpoint_io"); --report prints them.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace dtcli {

class CheckpointMeter {
 public:
  void saved(const std::string& stem, double seconds);   // after each dt_engine_save
  void loaded(const std::string& stem, double seconds);  // after the resume's dt_engine_load
  void staged(double seconds);                            // after a dt_engine_save_async: the stall
  bool any() const { return saves_ > 0 || load_s_ >= 0 || async_saves_ > 0; }
  nlohmann::json json() const;
  void print() const;

 private:
  int saves_ = 0, async_saves_ = 0;
  double save_s_ = 0, last_save_s_ = 0, load_s_ = -1, stall_s_ = 0;
  nlohmann::json last_, loaded_;  // the info of the last save's checkpoint, of the one loaded
};

}  // namespace dtcli
