// Filling tensors from the counter-based RNG: element i gets the value for global index
// offset + i, so a shard filled at its offset equals that slice of the full tensor.
#pragma once
#include <string>

#include "core/tensor.h"

namespace dt {

enum class Distribution { Normal, Uniform };

// Normal(a = mean, b = std) or Uniform[a, b). Floating tensors only.
void fill_random(Tensor& t, Distribution dist, uint64_t seed, const std::string& name, int64_t offset, float a,
                 float b);

}  // namespace dt
