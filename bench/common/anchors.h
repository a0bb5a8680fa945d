// Anchors measured in the same run as the figures they scale: the single-core FP32 FMA
// peak and the memory bandwidth of a large memcpy. Ratios against them stay meaningful on
// a shared, noisy machine where absolute figures drift from run to run.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "common/bench_util.h"

namespace dt::bench {

struct FmaPeak {
  std::string isa;        // "avx512f", "avx2+fma" or "scalar" (what this CPU supports)
  double median_gflops = 0, best_gflops = 0;
  int reps = 0;
};

// A register-resident loop of independent FMA chains on one core, with the widest vector
// FMA the CPU has (kernels/cpu/cpu_features.h); 2 FLOPs per lane per FMA.
FmaPeak measure_fma_peak(bool quick);

// The same loop with the AVX512-BF16 dot product (vdpbf16ps: 16 lanes x 2 bf16 products
// accumulated in f32, 64 FLOPs per instruction); 0 GFLOP/s (isa "none") when the CPU lacks it.
FmaPeak measure_bf16_dot_peak(bool quick);

// Four independent AMX tile products (tdpbf16ps, 16384 FLOPs each) per iteration: the most a
// bf16 GEMM on AMX can reach on one core; isa "none" without usable AMX-BF16. The loops are
// the library's (kernels/cpu/peak_loops.h), which chooses the GEMM path from the same rates.
FmaPeak measure_amx_bf16_peak(bool quick);

struct CopyBandwidth {
  int threads = 1;
  size_t bytes = 0;       // size of each of the two buffers
  double median_gbps = 0, best_gbps = 0;  // (read + write bytes) / time
  int reps = 0;
};

// memcpy of a `bytes` buffer into another (both allocated and touched once, then reused),
// once per entry of `thread_counts` (the copy split in contiguous parts over a blocking pool
// of that many threads). Counts read + write bytes.
std::vector<CopyBandwidth> measure_copy_bandwidth(size_t bytes, const std::vector<int>& thread_counts, bool quick);

// Prints the anchors and records them in the report (keys fma_*, bf16_dot_*, memcpy_*);
// measures the bf16 dot-product peak itself (quick) when the CPU has AVX512-BF16.
void report_anchors(const FmaPeak& fma, int kernel_threads, const std::vector<CopyBandwidth>& copies, Report& report);

}  // namespace dt::bench
