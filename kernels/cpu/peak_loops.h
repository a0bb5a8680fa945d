// Register-resident loops that run one arithmetic instruction at its throughput limit on
// one core: the peaks the GEMM path is chosen by (gemm_path.h) and that benchmarks scale
// their figures by (bench/common/anchors.h). Measured, not taken from a datasheet: on a
// shared virtual machine the rates move, and one CPU's AVX512-BF16 ran at half the FMA rate.
#pragma once
#include <string>

namespace dt::kernels::cpu {

enum class PeakLoop {
  FmaScalar,      // x = x * m + c, 8 scalar chains
  FmaAvx2,        // 10 chains of 8-lane FMA
  FmaAvx512,      // 12 chains of 16-lane FMA
  DotBf16Avx512,  // 12 chains of vdpbf16ps (16 lanes x 2 bf16 products)
  TileBf16Amx,    // 4 independent tdpbf16ps (16 x 16 f32 += 16 x 32 bf16 . 32 x 16 bf16)
};

// FLOPs one iteration performs (a multiply-add counts 2).
double peak_loop_flops_per_iter(PeakLoop loop);
// Runs `iters` iterations; the result only keeps the work from being optimized away.
// Only for a loop the CPU has (cpu_features()).
double run_peak_loop(PeakLoop loop, long iters);
// "avx512f", "avx2+fma", "scalar", "avx512bf16", "amx-bf16".
const char* peak_loop_isa(PeakLoop loop);

// The widest f32 FMA loop this CPU has.
PeakLoop widest_fma_loop();

struct PeakRate {
  std::string isa;
  double median_gflops = 0, best_gflops = 0;
  int reps = 0;
};

// Times `loop` on the calling thread: each run sized to about `run_seconds`, `reps` runs.
PeakRate measure_peak(PeakLoop loop, double run_seconds, int reps);

}  // namespace dt::kernels::cpu
