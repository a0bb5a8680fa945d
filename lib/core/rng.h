// Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11). A value depends only
// on (seed, name, element index), never on call order, thread or layout, so a parameter
// shard initialized at its global offset equals that slice of the unsharded parameter.
#pragma once
#include <array>
#include <cstdint>
#include <string>

namespace dt {

using Philox4 = std::array<uint32_t, 4>;

// One Philox4x32-10 block: four 32-bit words from a 128-bit counter and a 64-bit key.
Philox4 philox4x32(Philox4 counter, uint64_t key);

// Stable 64-bit hash of a name (FNV-1a); part of the counter, so names are independent streams.
uint64_t name_hash(const std::string& name);

class CounterRng {
 public:
  CounterRng(uint64_t seed, const std::string& name) : seed_(seed), stream_(name_hash(name)) {}
  // Uniform in [0, 1) for global element index i (24 random bits, exact in f32).
  float uniform(uint64_t i) const;
  // Standard normal for element i (Box-Muller on the block's two 32-bit pairs).
  float normal(uint64_t i) const;
  uint32_t bits(uint64_t i) const;  // 32 random bits for element i

 private:
  uint64_t seed_;
  uint64_t stream_;
};

}  // namespace dt
