// Inputs for the model benchmarks: batches of random token ids (next-token targets).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace dt::bench {

struct Batch {
  Tensor in, tg;
};

// B random sequences of T + 1 ids below V keyed by seed: inputs i32 [B, T] are the first T
// of each, targets the last T.
Batch random_batch(int64_t B, int64_t T, int64_t V, uint64_t seed);

}  // namespace dt::bench
