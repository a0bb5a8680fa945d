// How the next token is drawn from a row of logits: generation's (engine/generate.h) and
// serving's (serve/sequence.h) options, declared and checked once.
//
// Temperature 0 is greedy (argmax, lowest id on ties). Otherwise the logits are divided by
// the temperature, cut to the top_k largest (0: all) and then to the smallest set whose
// probability reaches top_p (1: all), renormalized, and sampled by inverse CDF with a
// uniform number the caller draws from a counter-based RNG, so a draw never depends on
// timing or threads.
#pragma once
#include <cstdint>
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

}  // namespace dt::engine
