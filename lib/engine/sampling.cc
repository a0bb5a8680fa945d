// Serving's additions to sampling (engine/sampling.h): the logit adjustments of the OpenAI
// completions API and log-probabilities. sample_token and SamplingOptions::check, which
// generation shares, are in engine/generate.cc.
#include "engine/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/error.h"

namespace dt::engine {
namespace {

void check_range(const char* key, float v, float lo, float hi, bool lo_open, const char* accepted) {
  const bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v <= hi;
  DT_CHECK(ok, std::string(key) + " = " + std::to_string(v) + "; accepted: " + accepted);
}

}  // namespace

bool LogitsAdjust::active() const {
  return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f || !logit_bias.empty();
}

void LogitsAdjust::check(int64_t vocab_size) const {
  check_range("presence_penalty", presence_penalty, -kMaxPenalty, kMaxPenalty, false, "[-2, 2] (0: off)");
  check_range("frequency_penalty", frequency_penalty, -kMaxPenalty, kMaxPenalty, false, "[-2, 2] (0: off)");
  check_range("repetition_penalty", repetition_penalty, 0.0f, kMaxRepetitionPenalty, true, "(0, 2] (1: off)");
  DT_CHECK(logit_bias.size() <= kMaxLogitBiasEntries,
           "logit_bias: " + std::to_string(logit_bias.size()) + " entries; accepted: at most " +
               std::to_string(kMaxLogitBiasEntries));
  std::vector<int32_t> ids;
  for (const auto& [id, bias] : logit_bias) {
    DT_CHECK(id >= 0 && id < vocab_size, "logit_bias: token id " + std::to_string(id) +
                                             " is outside [0, vocab_size = " + std::to_string(vocab_size) + ")");
    DT_CHECK(std::isfinite(bias) && bias >= -kMaxLogitBias && bias <= kMaxLogitBias,
             "logit_bias: bias " + std::to_string(bias) + " for token " + std::to_string(id) + "; accepted: [-100, 100]");
    ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  const auto dup = std::adjacent_find(ids.begin(), ids.end());
  DT_CHECK(dup == ids.end(), "logit_bias: token id " + std::to_string(dup == ids.end() ? 0 : *dup) +
                                 " appears twice; accepted: each id once");
}

void LogitsAdjust::apply(float* row, int64_t V, const std::vector<int32_t>& tokens, int64_t prompt_len) const {
  for (const auto& [id, bias] : logit_bias) row[id] += bias;
  if (repetition_penalty != 1.0f) {  // each distinct token once, however often it occurs
    std::vector<int32_t> seen(tokens);
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t t : seen) {
      DT_ASSERT(t >= 0 && t < V);
      float& x = row[t];
      x = x > 0 ? x / repetition_penalty : x * repetition_penalty;
    }
  }
  if (presence_penalty != 0.0f || frequency_penalty != 0.0f) {
    // Counts by sorting a copy of the output: no V-sized buffer per row and step.
    std::vector<int32_t> out(tokens.begin() + prompt_len, tokens.end());
    std::sort(out.begin(), out.end());
    for (size_t i = 0; i < out.size();) {
      size_t j = i;
      while (j < out.size() && out[j] == out[i]) ++j;
      DT_ASSERT(out[i] >= 0 && out[i] < V);
      row[out[i]] -= presence_penalty + frequency_penalty * static_cast<float>(j - i);
      i = j;
    }
  }
}

TokenLogprobs token_logprobs(const float* row, int64_t V, int32_t chosen, int k) {
  DT_ASSERT(V >= 1 && chosen >= 0 && chosen < V && k >= 0);
  const double mx = *std::max_element(row, row + V);
  double z = 0;
  for (int64_t i = 0; i < V; ++i) z += std::exp(static_cast<double>(row[i]) - mx);
  const double lse = mx + std::log(z);
  TokenLogprobs lp;
  lp.logprob = static_cast<float>(row[chosen] - lse);
  const int64_t n = std::min<int64_t>(k, V);
  if (n == 0) return lp;
  std::vector<int32_t> idx(static_cast<size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + n, idx.end(),
                    [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  for (int64_t i = 0; i < n; ++i) {
    lp.top_ids.push_back(idx[static_cast<size_t>(i)]);
    lp.top_logprobs.push_back(static_cast<float>(row[idx[static_cast<size_t>(i)]] - lse));
  }
  return lp;
}

}  // namespace dt::engine
