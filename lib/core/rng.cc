#include "core/rng.h"

#include <cmath>

namespace dt {

Philox4 philox4x32(Philox4 c, uint64_t key) {
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(0xD2511F53u) * c[0];
    uint64_t p1 = uint64_t(0xCD9E8D57u) * c[2];
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

uint64_t name_hash(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : name) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  return h;
}

static Philox4 block(uint64_t seed, uint64_t stream, uint64_t index) {
  Philox4 counter = {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                     static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)};
  return philox4x32(counter, seed);
}

uint32_t CounterRng::bits(uint64_t i) const { return block(seed_, stream_, i / 4)[i % 4]; }

float CounterRng::uniform(uint64_t i) const { return static_cast<float>(bits(i) >> 8) * (1.0f / 16777216.0f); }

float CounterRng::normal(uint64_t i) const {
  // Element i owns half of block i/2: two words for one Box-Muller draw.
  Philox4 b = block(seed_, stream_ ^ 0x9e3779b97f4a7c15ull, i / 2);
  uint32_t a = b[(i % 2) * 2], c = b[(i % 2) * 2 + 1];
  double u1 = (static_cast<double>(a) + 1.0) * (1.0 / 4294967296.0);  // (0, 1]
  double u2 = static_cast<double>(c) * (1.0 / 4294967296.0);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

}  // namespace dt
