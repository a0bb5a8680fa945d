// Inputs for the model benchmarks: the model their common flags describe, and batches of
// random token ids (next-token targets).
#pragma once
#include <cstdint>
#include <string>

#include "common/bench_util.h"
#include "core/tensor.h"
#include "nn/config.h"

namespace dt::bench {

struct Batch {
  Tensor in, tg;
};

// B random sequences of T + 1 ids below V keyed by seed: inputs i32 [B, T] are the first T
// of each, targets the last T.
Batch random_batch(int64_t B, int64_t T, int64_t V, uint64_t seed);

// --key as a positive integer, `fallback` when absent; anything else prints "<bench>: --key
// value: a positive integer is required" and `usage` to stderr and exits 2.
int64_t positive_flag(const Options& opt, const char* key, int64_t fallback, const std::string& usage,
                      const char* bench);

// The GPT of --layers, --d-model, --heads and --context (positive_flag each), the rest the
// library's defaults (gpt-small's byte vocabulary, GELU, LayerNorm, learned positions).
struct GptShape {
  int64_t layers, d_model, heads, context;
};
nn::GPTConfig gpt_from_flags(const Options& opt, const GptShape& fallback, const std::string& usage, const char* bench);

}  // namespace dt::bench
