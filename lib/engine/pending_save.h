// A checkpoint save in flight (Trainer::start_save, finish_save): complete wherever a
// Trainer is made or destroyed, since its unique_ptr member is destroyed there.
#pragma once
#include <future>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/trainer.h"

namespace dt::engine {

struct Trainer::PendingSave {
  std::string dir, stem;
  nlohmann::json meta;
  int64_t generation = 0;
  std::vector<std::future<nlohmann::json>> writes;  // per local part: its writer's table
  std::vector<double> started_us;
};

}  // namespace dt::engine
