// The sampling keys dt_engine_generate and dt_server_submit share ("temperature", "top_k",
// "top_p", "seed"), read and range-checked once (engine::SamplingOptions::check), and
// dt_server_submit's own: the penalties, "logit_bias" and "logprobs" (their ranges are
// checked with the request, by serve::ServingEngine::check_request, which knows the vocabulary).
#pragma once
#include <cerrno>
#include <cmath>
#include <cstdlib>
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

// "logit_bias": "id:bias" pairs separated by commas ("50256:-100,11:2.5"; "" none). Only
// the syntax is checked here; ids, biases, duplicates and the count with the request.
inline std::vector<std::pair<int32_t, float>> parse_logit_bias(const std::string& text) {
  auto bad = [&](const std::string& item) {
    return "option \"logit_bias\" = \"" + text + "\": bad entry \"" + item +
           "\"; accepted: \"id:bias\" pairs separated by commas, such as \"50256:-100,11:2.5\" (ids in [0, "
           "vocab_size), biases in [-100, 100], at most " +
           std::to_string(engine::kMaxLogitBiasEntries) + " entries, each id once)";
  };
  std::vector<std::pair<int32_t, float>> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    at = end + 1;
    // No more entries than the bound (plus one, so the check names the count): a huge
    // string is refused before it is parsed whole.
    DT_CHECK(out.size() <= engine::kMaxLogitBiasEntries,
             "option \"logit_bias\": more than " + std::to_string(engine::kMaxLogitBiasEntries) +
                 " entries; accepted: at most " + std::to_string(engine::kMaxLogitBiasEntries));
    const size_t colon = item.find(':');
    DT_CHECK(colon != std::string::npos, bad(item));
    const std::string id_s = item.substr(0, colon), bias_s = item.substr(colon + 1);
    char* stop = nullptr;
    errno = 0;
    const long long id = std::strtoll(id_s.c_str(), &stop, 10);
    auto blank_to_end = [](const char* p) {
      while (*p == ' ') ++p;
      return *p == '\0';
    };
    DT_CHECK(!id_s.empty() && errno == 0 && blank_to_end(stop) && id >= 0 && id <= INT32_MAX, bad(item));
    errno = 0;
    const double bias = std::strtod(bias_s.c_str(), &stop);
    DT_CHECK(!bias_s.empty() && stop != bias_s.c_str() && blank_to_end(stop) && std::isfinite(bias), bad(item));
    out.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
  }
  return out;
}

// dt_server_submit's logit adjustments and "logprobs" (ranges: engine/sampling.h).
inline void read_logits_adjust(const OptionReader& r, engine::LogitsAdjust& a, int32_t& logprobs) {
  a.presence_penalty = static_cast<float>(r.get_double("presence_penalty", 0.0));
  a.frequency_penalty = static_cast<float>(r.get_double("frequency_penalty", 0.0));
  a.repetition_penalty = static_cast<float>(r.get_double("repetition_penalty", 1.0));
  a.logit_bias = parse_logit_bias(r.get_string("logit_bias", ""));
  const int64_t k = r.get_int("logprobs", -1);  // checked before narrowing: 2^32 must not wrap to 0
  DT_CHECK(k >= -1 && k <= engine::kMaxLogprobs, "option \"logprobs\" = " + std::to_string(k) +
                                                     "; accepted: [0, " + std::to_string(engine::kMaxLogprobs) +
                                                     "] alternatives per token, or -1: none");
  logprobs = static_cast<int32_t>(k);
}

}  // namespace dt::api
