// The sections of bench_kernels, one file each. Every section prints a table, adds one
// JSON record per row, and reports ops that are not registered yet as "skipped".
#pragma once
#include <functional>
#include <string>

#include "common/bench_util.h"

namespace dt::bench {

struct Context {
  const Options& opt;
  Report& report;
  int threads = 1;              // kernel threads
  double peak_gflops_1core = 0; // FMA anchor, one core
  double copy_gbps = 0;         // memcpy anchor with `threads` threads
  bool failed = false;          // an op threw something other than UNSUPPORTED
  double peak_gflops() const { return peak_gflops_1core * threads; }
};

// Runs `body`. A dt::Error with DT_ERR_UNSUPPORTED (op not registered yet) prints
// "skipped: <message>"; any other exception prints "failed: <message>" and marks the run
// failed. Both are recorded in the report's notes under `section`.
void guarded(Context& ctx, const std::string& section, const std::function<void()>& body);

void bench_matmul(Context& ctx);
void bench_attention(Context& ctx);
void bench_layernorm(Context& ctx);

}  // namespace dt::bench
