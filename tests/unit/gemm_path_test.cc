// The run-time GEMM path: what the CPU detection, the knobs and the choice say agree with one
// another, the AMX kernel equals a double-precision reference on every transpose, edge and
// output type, and the runtime report is well-formed. ctest runs this file once per path
// (tests/CMakeLists.txt: default, DTRAIN_CPU_BF16_GEMM=0, DTRAIN_CPU_MAX_ISA=avx512_bf16
// with DTRAIN_CPU_BF16_GEMM=1, DTRAIN_CPU_MAX_ISA=avx2).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "dtrain/dtrain.h"
#include "kernels/cpu/amx_gemm.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_path.h"
#include "kernels/cpu/peak_loops.h"

namespace dt::kernels::cpu {
namespace DT_TEST_NS {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

TEST(GemmPath, ChoiceFollowsTheCpuAndTheKnobs) {
  const CpuFeatures& f = cpu_features();
  const GemmChoice& c = gemm_choice();
  const std::string forced = env_or("DTRAIN_CPU_BF16_GEMM", "");
  // The cap hides what lies above it.
  if (f.capped) {
    EXPECT_LE(static_cast<int>(f.level()), static_cast<int>(f.cap));
    if (f.cap < IsaLevel::Amx) EXPECT_FALSE(f.amx_bf16);
    if (f.cap < IsaLevel::Avx512Bf16) EXPECT_FALSE(f.avx512_bf16);
    if (f.cap < IsaLevel::Avx512) EXPECT_FALSE(f.avx512f);
  }
  EXPECT_FALSE(c.bf16_reason.empty());
  if (forced == "0") {
    EXPECT_FALSE(c.bf16_native) << c.bf16_reason;
  } else if (f.amx_bf16) {
    EXPECT_TRUE(c.bf16_native && c.bf16_amx) << c.bf16_reason;
  } else {
    EXPECT_FALSE(c.bf16_amx);
    if (!f.avx512_bf16 || !backend_has_bf16_gemm()) EXPECT_FALSE(c.bf16_native) << c.bf16_reason;
    if (forced == "1" && f.avx512_bf16 && backend_has_bf16_gemm()) EXPECT_TRUE(c.bf16_native) << c.bf16_reason;
  }
  // matmul asks the backend only when its bf16 kernel, not libdtrain's AMX one, was chosen.
  EXPECT_EQ(gemm_bf16_native(), c.bf16_native && !c.bf16_amx);
}

TEST(GemmPath, PeakLoopsMeasureWhatTheCpuHas) {
  PeakRate fma = measure_peak(widest_fma_loop(), 0.001, 3);
  EXPECT_GT(fma.median_gflops, 0.1);
  if (cpu_features().avx512_bf16) EXPECT_GT(measure_peak(PeakLoop::DotBf16Avx512, 0.001, 3).median_gflops, 0.1);
  if (cpu_features().amx_bf16) {
    // A tile product does 16x the work of a 16-lane FMA per instruction; on any AMX CPU
    // measured it outruns the FMA loop (about 15x on the project's Xeon).
    PeakRate amx = measure_peak(PeakLoop::TileBf16Amx, 0.001, 3);
    EXPECT_GT(amx.median_gflops, fma.median_gflops);
  }
}

double ref_at(bool ta, bool tb, const std::vector<uint16_t>& a, int64_t lda, const std::vector<uint16_t>& b,
              int64_t ldb, int64_t i, int64_t j, int64_t k) {
  double s = 0;
  for (int64_t kk = 0; kk < k; ++kk)
    s += static_cast<double>(bf16_bits_to_f32(ta ? a[kk * lda + i] : a[i * lda + kk])) *
         bf16_bits_to_f32(tb ? b[j * ldb + kk] : b[kk * ldb + j]);
  return s;
}

// Every transpose; edges in M, N and K (1, under one tile, across the K pass of 384); f32 and
// bf16 output; alpha and beta, and beta 0 over a NaN-filled C (ignored, as BLAS does).
TEST(AmxGemm, EqualsTheReferenceOnEveryTransposeEdgeAndOutput) {
  if (!cpu_features().amx_bf16) GTEST_SKIP() << "no usable AMX-BF16 here";
  struct Shape {
    int64_t m, n, k;
  };
  uint32_t seed = 12345;
  auto next = [&] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<int32_t>(seed >> 8) % 2001 - 1000) / 700.0f;
  };
  for (Shape s : {Shape{1, 1, 1}, Shape{37, 53, 71}, Shape{64, 32, 32}, Shape{70, 150, 800}, Shape{5, 300, 3}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool out16 : {false, true})
          for (float beta : {0.0f, 1.5f}) {
            std::vector<uint16_t> a(s.m * s.k), b(s.k * s.n);
            for (auto& x : a) x = f32_to_bf16_bits(next());
            for (auto& x : b) x = f32_to_bf16_bits(next());
            const int64_t lda = ta ? s.m : s.k, ldb = tb ? s.k : s.n;
            std::vector<float> c32(s.m * s.n);
            std::vector<uint16_t> c16(s.m * s.n);
            for (int64_t i = 0; i < s.m * s.n; ++i) {
              c32[i] = beta == 0.0f ? NAN : next();
              c16[i] = f32_to_bf16_bits(c32[i]);
            }
            const std::vector<float> old32 = c32;
            const std::vector<uint16_t> old16 = c16;
            amx_gemm_bf16(ta, tb, s.m, s.n, s.k, 0.75f, a.data(), lda, b.data(), ldb, beta,
                          out16 ? nullptr : c32.data(), out16 ? c16.data() : nullptr, s.n);
            double worst = 0;
            for (int64_t i = 0; i < s.m; ++i)
              for (int64_t j = 0; j < s.n; ++j) {
                double old = beta == 0.0f ? 0.0 : (out16 ? bf16_bits_to_f32(old16[i * s.n + j]) : old32[i * s.n + j]);
                double want = 0.75 * ref_at(ta, tb, a, lda, b, ldb, i, j, s.k) + beta * old;
                double got = out16 ? bf16_bits_to_f32(c16[i * s.n + j]) : c32[i * s.n + j];
                ASSERT_TRUE(std::isfinite(got)) << i << "," << j;
                // f32 accumulation over k terms of size ~1, then (bf16) one rounding.
                double tol = (out16 ? 8e-3 : 1e-5 * std::sqrt(static_cast<double>(s.k))) * (1 + std::fabs(want));
                worst = std::max(worst, std::fabs(got - want) / tol);
              }
            EXPECT_LE(worst, 1.0) << "m=" << s.m << " n=" << s.n << " k=" << s.k << " ta=" << ta << " tb=" << tb
                                  << " out16=" << out16 << " beta=" << beta;
          }
}

TEST(GemmPath, RuntimeInfoJsonDescribesTheChoice) {
  size_t needed = 0;
  ASSERT_EQ(dt_runtime_info_json(nullptr, 0, &needed), DT_OK);
  std::string s(needed, '\0');
  ASSERT_EQ(dt_runtime_info_json(s.data(), s.size(), &needed), DT_OK);
  s.resize(needed - 1);
  nlohmann::json j = nlohmann::json::parse(s);
  EXPECT_EQ(j["version"], dt_version());
  EXPECT_EQ(j["cpu"]["gemm"]["bf16_native"].get<bool>(), gemm_choice().bf16_native);
  EXPECT_EQ(j["cpu"]["gemm"]["bf16"].get<std::string>(), gemm_choice().bf16);
  EXPECT_EQ(j["cpu"]["isa_level"].get<std::string>(), isa_level_name(cpu_features().level()));
  EXPECT_TRUE(j["cuda_devices"].is_number_integer());
}

}  // namespace
}  // namespace dt::kernels::cpu
