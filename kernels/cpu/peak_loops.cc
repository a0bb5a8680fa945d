#include "kernels/cpu/peak_loops.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/cpu_features.h"

namespace dt::kernels::cpu {
namespace {

// Distinct starting values keep the compiler from merging chains; the chain count exceeds
// latency x ports (4 x 2 on current x86), so each loop is bound by throughput alone.
__attribute__((target("avx512f"), noinline)) double fma_avx512(long iters) {
  __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  __m512 x[12];
  for (int j = 0; j < 12; ++j) x[j] = _mm512_set1_ps(1.0f + 0.01f * static_cast<float>(j));
  for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) x[j] = _mm512_fmadd_ps(x[j], m, c);
  }
  __m512 s = x[0];
  for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, x[j]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0] + out[15];
}

__attribute__((target("avx2,fma"), noinline)) double fma_avx2(long iters) {
  __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  __m256 x[10];
  for (int j = 0; j < 10; ++j) x[j] = _mm256_set1_ps(1.0f + 0.01f * static_cast<float>(j));
  for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 10
    for (int j = 0; j < 10; ++j) x[j] = _mm256_fmadd_ps(x[j], m, c);
  }
  float out[8];
  __m256 s = x[0];
  for (int j = 1; j < 10; ++j) s = _mm256_add_ps(s, x[j]);
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}

__attribute__((noinline)) double fma_scalar(long iters) {
  volatile float seed = 0.999999f;
  float m = seed, c = 1e-7f, x[8];
  for (int j = 0; j < 8; ++j) x[j] = 1.0f + 0.01f * static_cast<float>(j);
  for (long i = 0; i < iters; ++i)
    for (int j = 0; j < 8; ++j) x[j] = x[j] * m + c;
  return x[0] + x[7];
}

__attribute__((target("avx512f,avx512bf16"), noinline)) double dot_bf16(long iters) {
  __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3380);  // 1, ~6e-8
  __m512 x[12];
  for (int j = 0; j < 12; ++j) x[j] = _mm512_set1_ps(1.0f + 0.01f * static_cast<float>(j));
  for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) x[j] = _mm512_dpbf16_ps(x[j], a, b);
  }
  __m512 s = x[0];
  for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, x[j]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0] + out[15];
}

// Tiles 0-3 accumulate, 4-5 hold A, 6-7 hold B: four independent products per iteration, as
// many as hide TDPBF16PS's latency on the one matrix unit.
__attribute__((target("amx-tile,amx-bf16"), noinline)) double tile_bf16(long iters) {
  alignas(64) uint16_t a[16 * 32], b[16 * 32];
  alignas(64) float acc[16 * 16] = {};
  std::fill(a, a + 16 * 32, uint16_t{0x3f80});
  std::fill(b, b + 16 * 32, uint16_t{0x3380});
  configure_tiles_16x64();
  _tile_loadd(0, acc, 64);
  _tile_loadd(1, acc, 64);
  _tile_loadd(2, acc, 64);
  _tile_loadd(3, acc, 64);
  _tile_loadd(4, a, 64);
  _tile_loadd(5, a, 64);
  _tile_loadd(6, b, 64);
  _tile_loadd(7, b, 64);
  for (long i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, acc, 64);
  _tile_release();
  return acc[0] + acc[255];
}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

volatile double g_sink;

}  // namespace

double peak_loop_flops_per_iter(PeakLoop loop) {
  switch (loop) {
    case PeakLoop::FmaScalar: return 8 * 2;
    case PeakLoop::FmaAvx2: return 10 * 8 * 2;
    case PeakLoop::FmaAvx512: return 12 * 16 * 2;
    case PeakLoop::DotBf16Avx512: return 12 * 32 * 2;
    case PeakLoop::TileBf16Amx: return 4.0 * 16 * 16 * 32 * 2;
  }
  return 0;
}

double run_peak_loop(PeakLoop loop, long iters) {
  switch (loop) {
    case PeakLoop::FmaScalar: return fma_scalar(iters);
    case PeakLoop::FmaAvx2: return fma_avx2(iters);
    case PeakLoop::FmaAvx512: return fma_avx512(iters);
    case PeakLoop::DotBf16Avx512: return dot_bf16(iters);
    case PeakLoop::TileBf16Amx: return tile_bf16(iters);
  }
  return 0;
}

const char* peak_loop_isa(PeakLoop loop) {
  switch (loop) {
    case PeakLoop::FmaScalar: return "scalar";
    case PeakLoop::FmaAvx2: return "avx2+fma";
    case PeakLoop::FmaAvx512: return "avx512f";
    case PeakLoop::DotBf16Avx512: return "avx512bf16";
    case PeakLoop::TileBf16Amx: return "amx-bf16";
  }
  return "?";
}

PeakLoop widest_fma_loop() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f) return PeakLoop::FmaAvx512;
  if (f.avx2_fma) return PeakLoop::FmaAvx2;
  return PeakLoop::FmaScalar;
}

PeakRate measure_peak(PeakLoop loop, double run_seconds, int reps) {
  PeakRate r;
  r.isa = peak_loop_isa(loop);
  long iters = 1 << 12;
  double t0 = seconds_now();
  g_sink = run_peak_loop(loop, iters);  // also the warm-up: AVX-512 and AMX units power up
  double dt = std::max(seconds_now() - t0, 1e-7);
  iters = std::max<long>(1 << 10, static_cast<long>(iters * run_seconds / dt));
  std::vector<double> times;
  for (int i = 0; i < std::max(1, reps); ++i) {
    double s = seconds_now();
    g_sink = run_peak_loop(loop, iters);
    times.push_back(std::max(seconds_now() - s, 1e-9));
  }
  std::sort(times.begin(), times.end());
  double flops = iters * peak_loop_flops_per_iter(loop);
  r.median_gflops = flops / times[times.size() / 2] / 1e9;
  r.best_gflops = flops / times.front() / 1e9;
  r.reps = static_cast<int>(times.size());
  return r;
}

}  // namespace dt::kernels::cpu
