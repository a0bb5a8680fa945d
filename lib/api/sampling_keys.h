// The sampling keys dt_engine_generate and dt_server_submit share ("temperature", "top_k",
// "top_p", "seed"), read and range-checked once (engine::SamplingOptions::check).
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "core/options.h"
#include "engine/sampling.h"

namespace dt::api {

inline void read_sampling(const OptionReader& r, engine::SamplingOptions& s) {
  const double temp = r.get_double("temperature", 0.0), top_p = r.get_double("top_p", 1.0);
  DT_CHECK(std::isfinite(temp) && temp >= 0,
           "option \"temperature\" = " + std::to_string(temp) + "; accepted: >= 0 (0: greedy)");
  DT_CHECK(top_p > 0 && top_p <= 1, "option \"top_p\" = " + std::to_string(top_p) + "; accepted: (0, 1]");
  s.temperature = static_cast<float>(temp);
  s.top_p = static_cast<float>(top_p);
  s.top_k = r.get_int("top_k", 0);
  s.seed = static_cast<uint64_t>(r.get_int("seed", 0));
}

// "stop_tokens": token ids separated by commas ("3,7"; "" none), appended to `out`.
inline void read_stop_tokens(const OptionReader& r, std::vector<int32_t>& out) {
  const std::string stops = r.get_string("stop_tokens", "");
  for (int64_t t : parse_int_list(stops, 0, INT32_MAX, [&](const std::string&) {
         return "option \"stop_tokens\" = \"" + stops + "\"; accepted: token ids separated by commas, such as \"3,7\"";
       }))
    out.push_back(static_cast<int32_t>(t));
}

}  // namespace dt::api
