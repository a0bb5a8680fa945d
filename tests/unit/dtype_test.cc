// bf16 and f16 conversions: rounding ties, NaN, Inf, subnormals, overflow, and agreement
// with the CPU's own f16 converter (F16C) where the CPU has one.
#include <cpuid.h>
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "core/dtype.h"
#include "core/rng.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

float f(uint32_t bits) { return bits_f32(bits); }

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie, even below
  EXPECT_EQ(f32_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie, even above
  EXPECT_EQ(f32_to_bf16_bits(f(0x3f808001)), 0x3f81);                    // just above the tie
  EXPECT_EQ(f32_to_bf16_bits(f(0x3f807fff)), 0x3f80);                    // just below the tie
  EXPECT_EQ(f32_to_bf16_bits(-0.0f), 0x8000);
}

TEST(Bf16, NanInfAndOverflow) {
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(f32_to_bf16_bits(-std::numeric_limits<float>::infinity()), 0xff80);
  // A NaN whose payload lives only in the low 16 bits must stay NaN, not become Inf.
  uint16_t n = f32_to_bf16_bits(f(0x7f800001));
  EXPECT_TRUE(std::isnan(bf16_bits_to_f32(n)));
  EXPECT_TRUE(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(f(0xffc00000)))));
  EXPECT_TRUE(std::signbit(bf16_bits_to_f32(f32_to_bf16_bits(f(0xffc00000)))));
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // past max bf16 + half ulp
  EXPECT_EQ(f32_to_bf16_bits(f(0x7f7f7fff)), 0x7f7f);                      // largest finite stays
}

TEST(Bf16, Subnormals) {
  EXPECT_EQ(f32_to_bf16_bits(f(0x00000001)), 0x0000);
  EXPECT_EQ(f32_to_bf16_bits(f(0x00008000)), 0x0000);  // tie to even (0)
  EXPECT_EQ(f32_to_bf16_bits(f(0x00018000)), 0x0002);  // tie to even (2)
  EXPECT_EQ(f32_to_bf16_bits(f(0x00010000)), 0x0001);  // exact smallest bf16 subnormal
  EXPECT_EQ(bf16_bits_to_f32(0x0001), f(0x00010000));
}

TEST(Bf16, EveryPatternRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    float v = bf16_bits_to_f32(static_cast<uint16_t>(b));
    if (std::isnan(v)) EXPECT_TRUE(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(v))));
    else ASSERT_EQ(f32_to_bf16_bits(v), b) << std::hex << b;
  }
}

TEST(F16, EdgeCases) {
  EXPECT_EQ(f32_to_f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(65519.0f), 0x7bff);  // below the tie: stays max
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7c00);  // tie with odd max: Inf
  EXPECT_EQ(f32_to_f16_bits(-1e30f), 0xfc00);
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -25)), 0x0000);  // tie to even (0)
  EXPECT_EQ(f32_to_f16_bits(3 * std::ldexp(1.0f, -25)), 0x0002);  // tie to even (2)
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(f32_to_f16_bits(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie, even below
  EXPECT_EQ(f32_to_f16_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie, even above
  EXPECT_TRUE(std::isnan(f16_bits_to_f32(f32_to_f16_bits(std::nanf("")))));
  EXPECT_TRUE(std::isnan(f16_bits_to_f32(f32_to_f16_bits(f(0x7f800001)))));  // low-payload NaN stays NaN
  EXPECT_EQ(f16_bits_to_f32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_bits_to_f32(0x03ff), 1023 * std::ldexp(1.0f, -24));  // largest subnormal
}

TEST(F16, EveryPatternRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    float v = f16_bits_to_f32(static_cast<uint16_t>(b));
    if (std::isnan(v)) EXPECT_TRUE(std::isnan(f16_bits_to_f32(f32_to_f16_bits(v))));
    else ASSERT_EQ(f32_to_f16_bits(v), b) << std::hex << b;
  }
}

__attribute__((target("f16c"))) uint16_t hw_f16(float v) { return _cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT); }

// CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c").
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

TEST(F16, MatchesHardwareConverterOnRandomAndBoundaryValues) {
  if (!cpu_has_f16c()) GTEST_SKIP() << "CPU has no F16C";
  CounterRng rng(5, "f16");
  int checked = 0;
  for (uint64_t i = 0; i < 2000000; ++i) {
    // Random bit patterns cover every exponent, including subnormal and overflow ranges.
    float v = f(rng.bits(i));
    if (std::isnan(v)) continue;
    ASSERT_EQ(f32_to_f16_bits(v), hw_f16(v)) << std::hexfloat << v;
    ++checked;
  }
  // Values dense around the half range: exponents 2^-26 .. 2^16.
  for (uint64_t i = 0; i < 1000000; ++i) {
    uint32_t bits = 0x32800000u + static_cast<uint32_t>(i * 0x1c5);
    ASSERT_EQ(f32_to_f16_bits(f(bits)), hw_f16(f(bits))) << std::hex << bits;
  }
  EXPECT_GT(checked, 1000000);
}

TEST(DType, NamesSizesAndUnknown) {
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::I64), 8u);
  EXPECT_STREQ(dtype_name(DType::F16), "f16");
  EXPECT_FALSE(dtype_valid(0));
  EXPECT_FALSE(dtype_valid(6));
  try {
    dtype_from_raw(42, "dtype");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DT_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("DT_BF16"), std::string::npos);
  }
}

}  // namespace
}  // namespace dt
