#include "common/anchors.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/thread_pool.h"

namespace dt::bench {
namespace {

// Each kernel runs `iters` iterations of N independent chains x = x * m + c. Distinct
// starting values keep the compiler from merging chains; N exceeds FMA latency x ports
// (4 x 2 on current x86), so the loop is bound by FMA throughput alone.
__attribute__((target("avx512f"), noinline)) double fma_avx512(long iters) {
  __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  __m512 x[12];
  for (int j = 0; j < 12; ++j) x[j] = _mm512_set1_ps(1.0f + 0.01f * static_cast<float>(j));
  for (long i = 0; i < iters; ++i) {
    x[0] = _mm512_fmadd_ps(x[0], m, c);
    x[1] = _mm512_fmadd_ps(x[1], m, c);
    x[2] = _mm512_fmadd_ps(x[2], m, c);
    x[3] = _mm512_fmadd_ps(x[3], m, c);
    x[4] = _mm512_fmadd_ps(x[4], m, c);
    x[5] = _mm512_fmadd_ps(x[5], m, c);
    x[6] = _mm512_fmadd_ps(x[6], m, c);
    x[7] = _mm512_fmadd_ps(x[7], m, c);
    x[8] = _mm512_fmadd_ps(x[8], m, c);
    x[9] = _mm512_fmadd_ps(x[9], m, c);
    x[10] = _mm512_fmadd_ps(x[10], m, c);
    x[11] = _mm512_fmadd_ps(x[11], m, c);
  }
  float out[16];
  __m512 s = x[0];
  for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, x[j]);
  _mm512_storeu_ps(out, s);
  return out[0] + out[15];
}
constexpr double kFlopsPerIterAvx512 = 12 * 16 * 2;

__attribute__((target("avx2,fma"), noinline)) double fma_avx2(long iters) {
  __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  __m256 x[10];
  for (int j = 0; j < 10; ++j) x[j] = _mm256_set1_ps(1.0f + 0.01f * static_cast<float>(j));
  for (long i = 0; i < iters; ++i) {
    x[0] = _mm256_fmadd_ps(x[0], m, c);
    x[1] = _mm256_fmadd_ps(x[1], m, c);
    x[2] = _mm256_fmadd_ps(x[2], m, c);
    x[3] = _mm256_fmadd_ps(x[3], m, c);
    x[4] = _mm256_fmadd_ps(x[4], m, c);
    x[5] = _mm256_fmadd_ps(x[5], m, c);
    x[6] = _mm256_fmadd_ps(x[6], m, c);
    x[7] = _mm256_fmadd_ps(x[7], m, c);
    x[8] = _mm256_fmadd_ps(x[8], m, c);
    x[9] = _mm256_fmadd_ps(x[9], m, c);
  }
  float out[8];
  __m256 s = x[0];
  for (int j = 1; j < 10; ++j) s = _mm256_add_ps(s, x[j]);
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}
constexpr double kFlopsPerIterAvx2 = 10 * 8 * 2;

__attribute__((noinline)) double fma_scalar(long iters) {
  volatile float seed = 0.999999f;
  float m = seed, c = 1e-7f, x[8];
  for (int j = 0; j < 8; ++j) x[j] = 1.0f + 0.01f * static_cast<float>(j);
  for (long i = 0; i < iters; ++i)
    for (int j = 0; j < 8; ++j) x[j] = x[j] * m + c;
  return x[0] + x[7];
}
constexpr double kFlopsPerIterScalar = 8 * 2;

// 12 chains of acc = acc + a . b (pairs of bf16), as fma_avx512.
__attribute__((target("avx512f,avx512bf16"), noinline)) double dot_bf16(long iters) {
  __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3380);  // 1, ~6e-8
  __m512 x[12];
  for (int j = 0; j < 12; ++j) x[j] = _mm512_set1_ps(1.0f + 0.01f * static_cast<float>(j));
  for (long i = 0; i < iters; ++i) {
    x[0] = _mm512_dpbf16_ps(x[0], a, b);
    x[1] = _mm512_dpbf16_ps(x[1], a, b);
    x[2] = _mm512_dpbf16_ps(x[2], a, b);
    x[3] = _mm512_dpbf16_ps(x[3], a, b);
    x[4] = _mm512_dpbf16_ps(x[4], a, b);
    x[5] = _mm512_dpbf16_ps(x[5], a, b);
    x[6] = _mm512_dpbf16_ps(x[6], a, b);
    x[7] = _mm512_dpbf16_ps(x[7], a, b);
    x[8] = _mm512_dpbf16_ps(x[8], a, b);
    x[9] = _mm512_dpbf16_ps(x[9], a, b);
    x[10] = _mm512_dpbf16_ps(x[10], a, b);
    x[11] = _mm512_dpbf16_ps(x[11], a, b);
  }
  float out[16];
  __m512 s = x[0];
  for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, x[j]);
  _mm512_storeu_ps(out, s);
  return out[0] + out[15];
}
constexpr double kFlopsPerIterBf16 = 12 * 32 * 2;

volatile double g_sink;  // keeps results alive

FmaPeak time_peak(double (*kernel)(long), double flops_per_iter, const char* isa, bool quick) {
  FmaPeak r;
  r.isa = isa;
  // Size one run to about 20 ms (10 ms quick) from a short calibration run.
  long iters = 1 << 20;
  double t0 = now_s();
  g_sink = kernel(iters);
  double dt = std::max(now_s() - t0, 1e-6);
  iters = std::max<long>(1 << 16, static_cast<long>(iters * (quick ? 0.01 : 0.02) / dt));
  Budget budget{quick ? 0.1 : 0.4, quick ? 5 : 15, quick ? 9 : 31};
  Stats s = time_one([&] { g_sink = kernel(iters); }, budget);
  r.median_gflops = iters * flops_per_iter / s.median_s / 1e9;
  r.best_gflops = iters * flops_per_iter / s.min_s / 1e9;
  r.reps = s.reps;
  return r;
}

}  // namespace

FmaPeak measure_fma_peak(bool quick) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return time_peak(fma_avx512, kFlopsPerIterAvx512, "avx512f", quick);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return time_peak(fma_avx2, kFlopsPerIterAvx2, "avx2+fma", quick);
  return time_peak(fma_scalar, kFlopsPerIterScalar, "scalar", quick);
}

FmaPeak measure_bf16_dot_peak(bool quick) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16")) return FmaPeak{"none", 0, 0, 0};
  return time_peak(dot_bf16, kFlopsPerIterBf16, "avx512bf16", quick);
}

std::vector<CopyBandwidth> measure_copy_bandwidth(size_t bytes, const std::vector<int>& thread_counts, bool quick) {
  auto deleter = [](char* p) { std::free(p); };
  std::unique_ptr<char, decltype(deleter)> src(static_cast<char*>(std::aligned_alloc(4096, bytes)), deleter);
  std::unique_ptr<char, decltype(deleter)> dst(static_cast<char*>(std::aligned_alloc(4096, bytes)), deleter);
  if (!src || !dst) {
    std::fprintf(stderr, "memcpy anchor: cannot allocate 2 x %zu bytes\n", bytes);
    return {};
  }
  std::memset(src.get(), 1, bytes);  // first touch, outside any timing
  std::memset(dst.get(), 2, bytes);
  std::vector<CopyBandwidth> out;
  for (int threads : thread_counts) {
    ThreadPool pool(threads);
    auto copy = [&] {
      pool.parallel_for(threads, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t part = lo; part < hi; ++part) {
          size_t begin = bytes * part / threads / 64 * 64;
          size_t end = part + 1 == threads ? bytes : bytes * (part + 1) / threads / 64 * 64;
          std::memcpy(dst.get() + begin, src.get() + begin, end - begin);
        }
      });
    };
    Stats s = time_one(copy, Budget{quick ? 0.2 : 1.0, quick ? 3 : 7, quick ? 5 : 21});
    CopyBandwidth c;
    c.threads = threads;
    c.bytes = bytes;
    c.median_gbps = 2.0 * bytes / s.median_s / 1e9;
    c.best_gbps = 2.0 * bytes / s.min_s / 1e9;
    c.reps = s.reps;
    out.push_back(c);
  }
  return out;
}

void report_anchors(const FmaPeak& fma, int kernel_threads, const std::vector<CopyBandwidth>& copies, Report& report) {
  std::printf("== anchors (medians; best in brackets)\n");
  std::printf("fma peak, 1 core (%s)       : %8.1f GFLOP/s [%.1f], %d runs\n", fma.isa.c_str(), fma.median_gflops,
              fma.best_gflops, fma.reps);
  std::printf("fma peak x %d kernel threads  : %8.1f GFLOP/s (1-core median x threads)\n", kernel_threads,
              fma.median_gflops * kernel_threads);
  auto& a = report.anchors();
  a.str("fma_isa", fma.isa)
      .num("fma_peak_gflops_1core", fma.median_gflops)
      .num("fma_peak_gflops_1core_best", fma.best_gflops)
      .num("fma_peak_gflops_x_threads", fma.median_gflops * kernel_threads)
      .num("fma_reps", fma.reps);
  const FmaPeak dot = measure_bf16_dot_peak(true);
  if (dot.reps > 0) {
    std::printf("bf16 dot peak, 1 core (%s): %8.1f GFLOP/s [%.1f]: %.2f x the fma peak (the most a bf16 GEMM can "
                "gain)\n", dot.isa.c_str(), dot.median_gflops, dot.best_gflops, dot.median_gflops / fma.median_gflops);
    a.num("bf16_dot_peak_gflops_1core", dot.median_gflops).num("bf16_dot_over_fma", dot.median_gflops / fma.median_gflops);
  }
  for (const auto& c : copies) {
    std::printf("memcpy 2 x %4zu MiB, %d thread%s : %8.1f GB/s [%.1f] (read + write bytes), %d runs\n", c.bytes >> 20,
                c.threads, c.threads == 1 ? " " : "s", c.median_gbps, c.best_gbps, c.reps);
    std::string k = strf("memcpy_gbps_%dt", c.threads);
    a.num(k, c.median_gbps).num(k + "_best", c.best_gbps).num(strf("memcpy_reps_%dt", c.threads), c.reps);
  }
  if (!copies.empty()) a.num("memcpy_buffer_bytes", static_cast<double>(copies[0].bytes));
}

}  // namespace dt::bench
