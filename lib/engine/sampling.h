// How the next token is drawn from a row of logits: generation's (engine/generate.h) and
// serving's (serve/sequence.h) options, declared and checked once.
//
// Temperature 0 is greedy (argmax, lowest id on ties). Otherwise the logits are divided by
// the temperature, cut to the top_k largest (0: all) and then to the smallest set whose
// probability reaches top_p (1: all), renormalized, and sampled by inverse CDF with a
// uniform number the caller draws from a counter-based RNG, so a draw never depends on
// timing or threads.
//
// Serving adds what the OpenAI completions API asks for (LogitsAdjust: a bias per token and
// the repetition, presence and frequency penalties, applied to the row before the draw
// above, greedy included) and log-probabilities of the model's raw row (token_logprobs).
// Generation does not use them, so its draws are unchanged.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace dt::engine {

struct SamplingOptions {
  float temperature = 0.0f;  // 0: greedy
  int64_t top_k = 0;         // 0: no cut
  float top_p = 1.0f;        // 1: no cut
  uint64_t seed = 0;
  std::vector<int32_t> stop_tokens;  // generation ends after one of these (it is kept)
  // INVALID_ARGUMENT naming the field: temperature < 0 or not finite, top_k < 0, top_p
  // outside (0, 1], a stop token outside [0, vocab_size).
  void check(int64_t vocab_size) const;
};

// One token from a row of V logits. `u` is a uniform number in [0, 1).
int32_t sample_token(const float* logits, int64_t V, const SamplingOptions& opt, float u);

// Bounds of the serving options below (the C API's documented ranges).
constexpr float kMaxPenalty = 2.0f;        // presence / frequency: [-2, 2] (OpenAI's range)
constexpr float kMaxRepetitionPenalty = 2.0f;  // (0, 2]; 1: off
constexpr float kMaxLogitBias = 100.0f;    // per entry: [-100, 100] (OpenAI's range)
constexpr std::size_t kMaxLogitBiasEntries = 300;
constexpr int kMaxLogprobs = 20;           // alternatives per token: [0, 20] (OpenAI's range)

// Changes to a row of logits before the draw, in vLLM's order:
//  1. logit_bias: row[id] += bias;
//  2. repetition_penalty p (transformers'): each distinct token of the prompt or the output
//     so far: row[t] = row[t] > 0 ? row[t] / p : row[t] * p;
//  3. presence a and frequency f (OpenAI's), over the output so far only, c[t] the count
//     of t there: row[t] -= a * (c[t] > 0) + f * c[t].
// At the defaults nothing changes and nothing is computed.
struct LogitsAdjust {
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;  // (id, bias), distinct ids

  bool active() const;
  // INVALID_ARGUMENT naming the field (as dt_server_submit's keys name it) and its range.
  void check(int64_t vocab_size) const;
  // `row`: V logits, changed in place. `tokens`: the prompt (its first prompt_len) and
  // then the output so far.
  void apply(float* row, int64_t V, const std::vector<int32_t>& tokens, int64_t prompt_len) const;
};

// A drawn token's log-probability and the k most likely tokens', from log-softmax(row)
// (computed in double): top ids by descending log-probability, lower id first on ties.
struct TokenLogprobs {
  float logprob = 0.0f;
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
};
TokenLogprobs token_logprobs(const float* row, int64_t V, int32_t chosen, int k);

}  // namespace dt::engine
