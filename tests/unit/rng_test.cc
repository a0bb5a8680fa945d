// Philox known answers, sharding invariance and the distributions' moments.
#include <cmath>

#include "core/random_fill.h"
#include "core/rng.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

TEST(Philox, KnownAnswers) {
  // Published known-answer vectors for Philox4x32-10.
  Philox4 zero = philox4x32({0, 0, 0, 0}, 0);
  EXPECT_EQ(zero, (Philox4{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  Philox4 ones = philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, 0xffffffffffffffffull);
  EXPECT_EQ(ones, (Philox4{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  Philox4 pi = philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, 0x299f31d0a4093822ull);
  EXPECT_EQ(pi, (Philox4{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(CounterRng, ValueDependsOnSeedNameAndIndexOnly) {
  CounterRng a(7, "blocks.0.attn.w"), b(7, "blocks.0.attn.w"), c(7, "blocks.1.attn.w"), d(8, "blocks.0.attn.w");
  EXPECT_EQ(a.bits(12345), b.bits(12345));
  EXPECT_NE(a.bits(12345), c.bits(12345));
  EXPECT_NE(a.bits(12345), d.bits(12345));
  EXPECT_EQ(a.normal(99), b.normal(99));
}

TEST(CounterRng, ShardFilledAtItsOffsetEqualsTheSliceOfTheWhole) {
  for (Distribution dist : {Distribution::Normal, Distribution::Uniform}) {
    Tensor whole = Tensor::zeros({10, 37}, DType::F32);
    fill_random(whole, dist, 3, "w", 0, -1.0f, 2.0f);
    Tensor shard = Tensor::zeros({4, 37}, DType::F32);
    fill_random(shard, dist, 3, "w", 3 * 37, -1.0f, 2.0f);
    for (int64_t i = 0; i < shard.numel(); ++i)
      ASSERT_EQ(shard.data<float>()[i], whole.data<float>()[3 * 37 + i]) << i;
  }
}

TEST(CounterRng, MomentsAreRight) {
  const int64_t n = 200000;
  Tensor t = Tensor::zeros({n}, DType::F32);
  fill_random(t, Distribution::Normal, 1, "n", 0, 0.5f, 2.0f);
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    s += t.data<float>()[i];
    s2 += double(t.data<float>()[i]) * t.data<float>()[i];
  }
  double mean = s / n, var = s2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 0.03);  // 5 standard errors: 5 * 2 / sqrt(n)
  EXPECT_NEAR(std::sqrt(var), 2.0, 0.02);
  fill_random(t, Distribution::Uniform, 1, "u", 0, -1.0f, 3.0f);
  double lo = 1e9, hi = -1e9;
  s = 0;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::fmin(lo, t.data<float>()[i]);
    hi = std::fmax(hi, t.data<float>()[i]);
    s += t.data<float>()[i];
  }
  EXPECT_GE(lo, -1.0);
  EXPECT_LT(hi, 3.0);
  EXPECT_NEAR(s / n, 1.0, 0.02);
}

TEST(CounterRng, BadArgumentsAreRejected) {
  Tensor i = Tensor::zeros({4}, DType::I32);
  EXPECT_THROW(fill_random(i, Distribution::Normal, 1, "x", 0, 0, 1), Error);
  Tensor f = Tensor::zeros({4}, DType::F32);
  EXPECT_THROW(fill_random(f, Distribution::Normal, 1, "x", 0, 0, -1), Error);
  EXPECT_THROW(fill_random(f, Distribution::Uniform, 1, "x", 0, 2, 1), Error);
  EXPECT_THROW(fill_random(f, Distribution::Uniform, 1, "x", -5, 0, 1), Error);
}

TEST(CounterRng, Bf16FillIsTheRoundedF32Fill) {
  Tensor a = Tensor::zeros({257}, DType::F32), b = Tensor::zeros({257}, DType::BF16);
  fill_random(a, Distribution::Normal, 9, "p", 0, 0, 1);
  fill_random(b, Distribution::Normal, 9, "p", 0, 0, 1);
  for (int i = 0; i < 257; ++i) ASSERT_EQ(b.data<bf16>()[i].bits, f32_to_bf16_bits(a.data<float>()[i]));
}

}  // namespace
}  // namespace dt
