// A request as the serving engine sees it: its tokens (prompt, then what was generated),
// its sampling parameters, where it is in its life, and its KV blocks.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/sampling.h"

namespace dt::serve {

// Per-request sampling, as generation samples (engine/sampling.h), with the draw keyed by
// (seed, "sample", index of the token in the output), so a request's tokens depend on its
// prompt and seed only, never on what else is in the batch, on preemption, or on timing.
// `adjust` changes the row before the draw (greedy too); `logprobs` >= 0 records each
// token's log-probability under the model's raw row and that many alternatives.
struct SamplingParams : engine::SamplingOptions {
  int64_t max_tokens = 16;  // >= 1
  engine::LogitsAdjust adjust;
  int32_t logprobs = -1;  // -1: none; [0, engine::kMaxLogprobs]
};

enum class SeqState { Waiting, Running, Preempted, Finished, Aborted, Rejected };
const char* seq_state_name(SeqState s);
inline bool terminal(SeqState s) { return s == SeqState::Finished || s == SeqState::Aborted || s == SeqState::Rejected; }

struct Sequence {
  using Clock = std::chrono::steady_clock;
  int64_t id = 0;
  std::vector<int32_t> tokens;  // prompt, then the output
  int64_t prompt_len = 0;
  SamplingParams params;
  SeqState state = SeqState::Waiting;
  // "stop", "length" (finished), "abort", or the reason of a rejection.
  std::string reason;

  // KV cache: block table, and how many leading positions have their keys and values there.
  std::vector<int32_t> blocks;
  int64_t computed = 0;
  int64_t published = 0;       // leading full blocks published for prefix caching
  uint64_t last_hash = 0;      // chain hash of those
  int64_t prefix_hit_tokens = 0;  // positions found in the prefix cache (all admissions)
  int64_t preemptions = 0;

  Clock::time_point arrival = Clock::now(), first_token, last_token;

  int64_t output_len() const { return static_cast<int64_t>(tokens.size()) - prompt_len; }
  std::vector<int32_t> output() const { return {tokens.begin() + prompt_len, tokens.end()}; }
};

}  // namespace dt::serve
