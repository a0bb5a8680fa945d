// bench_kernels: the CPU kernels of the op table (matmul, attention, layernorm) against
// anchors measured in the same run (single-core FMA peak, memcpy bandwidth). Medians over
// timed runs after a warm-up; buffers are allocated once per shape and reused.
//   bench_kernels [--threads N] [--quick] [--json PATH] [--filter SUBSTRING]
#include <cstdio>
#include <exception>

#include "common/anchors.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/blas.h"
#include "kernels/sections.h"

namespace dt::bench {

void guarded(Context& ctx, const std::string& section, const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    bool unsupported = e.code() == DT_ERR_UNSUPPORTED;
    std::printf("%s: %s\n", unsupported ? "skipped" : "failed", e.what());
    ctx.report.note(section, unsupported ? "skipped" : "failed", e.what());
    if (!unsupported) ctx.failed = true;
  } catch (const std::exception& e) {
    std::printf("failed: %s\n", e.what());
    ctx.report.note(section, "failed", e.what());
    ctx.failed = true;
  }
  std::fflush(stdout);
}

}  // namespace dt::bench

int main(int argc, char** argv) {
  using namespace dt::bench;
  const std::string usage =
      "usage: bench_kernels [--threads N] [--quick] [--json PATH] [--filter SUBSTRING]\n"
      "  --threads N    kernel threads (dt::set_kernel_threads); default: the library's\n"
      "  --quick        one shape per op family, few runs (< 20 s; the ctest smoke test)\n"
      "  --json PATH    also write every figure to PATH as JSON\n"
      "  --filter S     only items whose name contains S, e.g. matmul/T4096, attention/bwd,\n"
      "                 layernorm/fwd/R4096.C768 (the anchors always run)\n";
  Options opt = parse_args(argc, argv, usage);
  if (opt.threads > 0) dt::set_kernel_threads(opt.threads);
  const int threads = dt::kernel_threads();
  Report report("bench_kernels");
  std::string load_before = load_average();
  std::printf("bench_kernels: %d kernel thread%s, blas %s, %s; medians of timed runs after a warm-up\n", threads,
              threads == 1 ? "" : "s", dt::kernels::cpu::blas_name(), opt.quick ? "quick" : "full");
  std::printf("load average at start: %s\n\n", load_before.c_str());

  progress("anchors", 1, 2, "fma peak");
  FmaPeak fma = measure_fma_peak(opt.quick);
  // Past the last-level cache in the full run (the quick run touches less). Each thread's
  // part stays above glibc's non-temporal threshold (181 MiB here), so memcpy streams.
  size_t copy_bytes = (opt.quick ? size_t{512} : size_t{1024}) << 20;
  progress("anchors", 2, 2, "memcpy bandwidth");
  std::vector<int> copy_threads = threads > 1 ? std::vector<int>{1, threads} : std::vector<int>{1};
  std::vector<CopyBandwidth> copies = measure_copy_bandwidth(copy_bytes, copy_threads, opt.quick);
  report_anchors(fma, threads, copies, report);

  Context ctx{opt, report};
  ctx.threads = threads;
  ctx.peak_gflops_1core = fma.median_gflops;
  ctx.copy_gbps = copies.empty() ? 0.0 : copies.back().median_gbps;
  bench_matmul(ctx);
  bench_attention(ctx);
  bench_layernorm(ctx);

  std::string load_after = load_average();
  std::printf("\nload average at end: %s\n", load_after.c_str());
  report.meta()
      .num("threads", threads)
      .flag("quick", opt.quick)
      .str("blas", dt::kernels::cpu::blas_name())
      .str("filter", opt.filter)
      .str("load_before", load_before)
      .str("load_after", load_after)
      .flag("failed", ctx.failed);
  if (!opt.json_path.empty() && !report.write(opt.json_path)) return 1;
  return ctx.failed ? 1 : 0;
}
