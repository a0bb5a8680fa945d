#include "common/anchors.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_path.h"
#include "kernels/cpu/peak_loops.h"

namespace dt::bench {
namespace {

volatile double g_sink;  // keeps results alive

FmaPeak time_peak(kernels::cpu::PeakLoop loop, bool quick) {
  FmaPeak r;
  r.isa = kernels::cpu::peak_loop_isa(loop);
  const double flops_per_iter = kernels::cpu::peak_loop_flops_per_iter(loop);
  // Size one run to about 20 ms (10 ms quick) from a short calibration run.
  long iters = 1 << 14;
  double t0 = now_s();
  g_sink = kernels::cpu::run_peak_loop(loop, iters);
  double dt = std::max(now_s() - t0, 1e-6);
  iters = std::max<long>(1 << 10, static_cast<long>(iters * (quick ? 0.01 : 0.02) / dt));
  Budget budget{quick ? 0.1 : 0.4, quick ? 5 : 15, quick ? 9 : 31};
  Stats s = time_one([&] { g_sink = kernels::cpu::run_peak_loop(loop, iters); }, budget);
  r.median_gflops = iters * flops_per_iter / s.median_s / 1e9;
  r.best_gflops = iters * flops_per_iter / s.min_s / 1e9;
  r.reps = s.reps;
  return r;
}

}  // namespace

FmaPeak measure_fma_peak(bool quick) { return time_peak(kernels::cpu::widest_fma_loop(), quick); }

FmaPeak measure_bf16_dot_peak(bool quick) {
  if (!kernels::cpu::cpu_features().avx512_bf16) return FmaPeak{"none", 0, 0, 0};
  return time_peak(kernels::cpu::PeakLoop::DotBf16Avx512, quick);
}

FmaPeak measure_amx_bf16_peak(bool quick) {
  if (!kernels::cpu::cpu_features().amx_bf16) return FmaPeak{"none", 0, 0, 0};
  return time_peak(kernels::cpu::PeakLoop::TileBf16Amx, quick);
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
  const FmaPeak dot = measure_bf16_dot_peak(true), amx = measure_amx_bf16_peak(true);
  if (dot.reps > 0) {
    std::printf("bf16 dot peak, 1 core (%s): %8.1f GFLOP/s [%.1f]: %.2f x the fma peak\n", dot.isa.c_str(),
                dot.median_gflops, dot.best_gflops, dot.median_gflops / fma.median_gflops);
    a.num("bf16_dot_peak_gflops_1core", dot.median_gflops).num("bf16_dot_over_fma", dot.median_gflops / fma.median_gflops);
  }
  if (amx.reps > 0) {
    std::printf("amx bf16 peak, 1 core (tile loop): %8.1f GFLOP/s [%.1f]: %.2f x the fma peak\n", amx.median_gflops,
                amx.best_gflops, amx.median_gflops / fma.median_gflops);
    a.num("amx_bf16_peak_gflops_1core", amx.median_gflops).num("amx_bf16_over_fma", amx.median_gflops / fma.median_gflops);
  }
  const kernels::cpu::GemmChoice& g = kernels::cpu::gemm_choice();
  std::printf("gemm path: f32 %s; bf16 %s (%s)\n", g.f32.c_str(), g.bf16.c_str(), g.bf16_reason.c_str());
  a.str("gemm_f32", g.f32).str("gemm_bf16", g.bf16).str("gemm_bf16_reason", g.bf16_reason);
  for (const auto& c : copies) {
    std::printf("memcpy 2 x %4zu MiB, %d thread%s : %8.1f GB/s [%.1f] (read + write bytes), %d runs\n", c.bytes >> 20,
                c.threads, c.threads == 1 ? " " : "s", c.median_gbps, c.best_gbps, c.reps);
    std::string k = strf("memcpy_gbps_%dt", c.threads);
    a.num(k, c.median_gbps).num(k + "_best", c.best_gbps).num(strf("memcpy_reps_%dt", c.threads), c.reps);
  }
  if (!copies.empty()) a.num("memcpy_buffer_bytes", static_cast<double>(copies[0].bytes));
}

}  // namespace dt::bench
