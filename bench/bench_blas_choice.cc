// bench_blas_choice: OpenBLAS against BLIS (both as Debian ships them) on the sgemm shapes
// of a small GPT, in one process, next to the single-core FMA peak measured in the same run.
// Three ways to run each shape:
//   1t    : the library set to 1 thread, the whole problem;
//   split : the library set to 1 thread, the larger of M and N split in halves over a
//           blocking pool of N threads (default 2): what libdtrain's kernels do;
//   own   : the library's own threading set to N threads, the whole problem.
// Each library is loaded with dlopen(RTLD_LOCAL | RTLD_DEEPBIND) and called through its
// cblas_sgemm. DEEPBIND keeps each library's internal calls inside it: BLIS's cblas_sgemm
// calls sgemm_ through the PLT, and were another BLAS in the global scope (a benchmark that
// calls dt::kernels links OpenBLAS), that sgemm_ would win and "BLIS" would silently run
// OpenBLAS. Check with: LD_DEBUG=bindings bench_blas_choice --quick 2>&1 | grep "sgemm_'".
//   bench_blas_choice [--threads N] [--quick] [--json PATH] [--filter S]
//                     [--openblas PATH] [--blis PATH]
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "common/anchors.h"
#include "common/gpt_shapes.h"
#include "core/thread_pool.h"

namespace dt::bench {
namespace {

// The CBLAS enum values (identical in every cblas.h).
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                         int);

struct Blas {
  std::string name, path, version;
  SgemmFn sgemm = nullptr;
  void (*set_threads_int)(int) = nullptr;      // openblas_set_num_threads
  void (*set_threads_i64)(int64_t) = nullptr;  // bli_thread_set_num_threads
  void set_threads(int n) const {
    if (set_threads_int) set_threads_int(n);
    if (set_threads_i64) set_threads_i64(n);
  }
  void gemm(const GemmShape& s, int64_t m, int64_t n, const float* a, const float* b, float* c) const {
    sgemm(kRowMajor, s.trans_a ? kTrans : kNoTrans, s.trans_b ? kTrans : kNoTrans, static_cast<int>(m),
          static_cast<int>(n), static_cast<int>(s.k), 1.0f, a, static_cast<int>(s.lda()), b,
          static_cast<int>(s.ldb()), 0.0f, c, static_cast<int>(s.n));
  }
};

bool load(Blas& lib, const char* set_threads_symbol, const char* version_symbol) {
  void* h = dlopen(lib.path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!h) {
    std::fprintf(stderr, "error: dlopen %s: %s\n", lib.path.c_str(), dlerror());
    return false;
  }
  lib.sgemm = reinterpret_cast<SgemmFn>(dlsym(h, "cblas_sgemm"));
  void* st = dlsym(h, set_threads_symbol);
  if (lib.name == "openblas") lib.set_threads_int = reinterpret_cast<void (*)(int)>(st);
  else lib.set_threads_i64 = reinterpret_cast<void (*)(int64_t)>(st);
  auto version = reinterpret_cast<const char* (*)()>(dlsym(h, version_symbol));
  lib.version = version ? version() : "?";
  // The kernel set each library picked at run time for this CPU.
  if (auto core = reinterpret_cast<const char* (*)()>(dlsym(h, "openblas_get_corename")))
    lib.version += std::string(", core ") + core();
  auto arch_id = reinterpret_cast<int (*)()>(dlsym(h, "bli_arch_query_id"));
  auto arch_name = reinterpret_cast<const char* (*)(int)>(dlsym(h, "bli_arch_string"));
  if (arch_id && arch_name) lib.version += std::string(", arch ") + arch_name(arch_id());
  if (!lib.sgemm || !st) {
    std::fprintf(stderr, "error: %s lacks cblas_sgemm or %s\n", lib.path.c_str(), set_threads_symbol);
    return false;
  }
  return true;
}

// The larger of M and N in `parts` contiguous blocks, one per pool thread (as
// kernels/cpu/matmul.cc splits).
void gemm_split(const Blas& lib, ThreadPool& pool, int parts, const GemmShape& s, const float* a, const float* b,
                float* c) {
  bool split_m = s.m >= s.n;
  int64_t lines = split_m ? s.m : s.n;
  pool.parallel_for(parts, 1, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      int64_t lo = lines * j / parts, hi = lines * (j + 1) / parts;
      if (split_m) lib.gemm(s, hi - lo, s.n, s.trans_a ? a + lo : a + lo * s.lda(), b, c + lo * s.n);
      else lib.gemm(s, s.m, hi - lo, a, s.trans_b ? b + lo * s.ldb() : b + lo, c + lo);
    }
  });
}

double max_rel_diff(const std::vector<float>& x, const std::vector<float>& y) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(x[i] - y[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(x[i])));
  }
  return diff / scale;
}

const char* op_str(const GemmShape& s) { return s.trans_a ? "TN" : s.trans_b ? "NT" : "NN"; }

}  // namespace
}  // namespace dt::bench

int main(int argc, char** argv) {
  using namespace dt::bench;
  const std::string usage =
      "usage: bench_blas_choice [--threads N] [--quick] [--json PATH] [--filter S] [--openblas PATH] [--blis PATH]\n"
      "  --threads N      threads of the 'split' and 'own' runs (default 2)\n"
      "  --quick          T=1024, d=384 only, few runs\n"
      "  --json PATH      also write every figure to PATH as JSON\n"
      "  --filter S       only shapes whose name contains S, e.g. T4096.d768\n"
      "  --openblas PATH  default /usr/lib/x86_64-linux-gnu/libopenblas.so.0\n"
      "  --blis PATH      default /usr/lib/x86_64-linux-gnu/libblis.so.4\n";
  Options opt = parse_args(argc, argv, usage, {"openblas", "blis"});
  const int threads = opt.threads > 0 ? opt.threads : 2;
  Blas libs[2];
  libs[0].name = "openblas", libs[0].path = option_value(opt, "openblas", "/usr/lib/x86_64-linux-gnu/libopenblas.so.0");
  libs[1].name = "blis", libs[1].path = option_value(opt, "blis", "/usr/lib/x86_64-linux-gnu/libblis.so.4");
  if (!load(libs[0], "openblas_set_num_threads", "openblas_get_config") ||
      !load(libs[1], "bli_thread_set_num_threads", "bli_info_get_version_str"))
    return 1;
  for (auto& lib : libs) lib.set_threads(1);

  Report report("bench_blas_choice");
  std::string load_before = load_average();
  std::printf("bench_blas_choice: openblas (%s) vs blis (%s); %d threads for split/own; medians after a warm-up\n",
              libs[0].version.c_str(), libs[1].version.c_str(), threads);
  std::printf("load average at start: %s\n", load_before.c_str());
  FmaPeak fma = measure_fma_peak(opt.quick);
  std::printf("fma peak, 1 core (%s): %.1f GFLOP/s [best %.1f]; x %d threads = %.1f\n\n", fma.isa.c_str(),
              fma.median_gflops, fma.best_gflops, threads, fma.median_gflops * threads);
  report.anchors().str("fma_isa", fma.isa).num("fma_peak_gflops_1core", fma.median_gflops)
      .num("fma_peak_gflops_1core_best", fma.best_gflops);

  std::vector<GemmShape> shapes;
  for (const auto& s : gpt_gemm_shapes(opt.quick))
    if (selected(opt, s.name)) shapes.push_back(s);
  const char* modes[3] = {"1t", "split", "own"};
  std::printf("GFLOP/s; ratio = blis / openblas; split/own use %d threads\n", threads);
  std::printf("%-22s %5s %5s %5s %2s |%9s %9s %6s |%9s %9s %6s |%9s %9s %6s\n", "shape", "M", "N", "K", "op",
              "1t ob", "1t blis", "ratio", "split ob", "spl blis", "ratio", "own ob", "own blis", "ratio");
  Budget budget = opt.quick ? Budget{0.05, 3, 5} : Budget{0.6, 5, 15};
  dt::ThreadPool pool(threads);
  std::vector<double> ratios[3], ob_peak[3], blis_peak[3];
  double worst_diff = 0;
  int index = 0;
  for (const auto& s : shapes) {
    progress("blas", ++index, static_cast<int>(shapes.size()), s.name);
    std::vector<float> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.k * s.n));
    std::vector<float> c0(static_cast<size_t>(s.m * s.n)), c1(c0.size());
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 40503u) % 2003) / 1000.0f - 1.0f;
    float* cs[2] = {c0.data(), c1.data()};
    double gf[3][2];
    for (int mode = 0; mode < 3; ++mode) {
      std::vector<Stats> st(2);
      if (mode < 2) {  // one thread per library call: interleave the libraries run by run
        std::vector<std::function<void()>> fns;
        for (int l = 0; l < 2; ++l)
          fns.push_back(mode == 0 ? std::function<void()>([&, l] { libs[l].gemm(s, s.m, s.n, a.data(), b.data(), cs[l]); })
                                  : std::function<void()>([&, l] { gemm_split(libs[l], pool, threads, s, a.data(), b.data(), cs[l]); }));
        st = time_interleaved(fns, budget);
      } else {  // the libraries' own threads may spin after a call: one library at a time, then a pause
        for (int turn = 0; turn < 2; ++turn) {
          int l = (index + turn) % 2;
          libs[l].set_threads(threads);
          st[l] = time_one([&] { libs[l].gemm(s, s.m, s.n, a.data(), b.data(), cs[l]); }, budget);
          libs[l].set_threads(1);
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
        }
      }
      for (int l = 0; l < 2; ++l) gf[mode][l] = s.flops() / st[l].median_s / 1e9;
      double peak = fma.median_gflops * (mode == 0 ? 1 : threads);
      ratios[mode].push_back(gf[mode][1] / gf[mode][0]);
      ob_peak[mode].push_back(gf[mode][0] / peak);
      blis_peak[mode].push_back(gf[mode][1] / peak);
      if (mode == 0) worst_diff = std::max(worst_diff, max_rel_diff(c0, c1));
    }
    std::printf("%-22s %5lld %5lld %5lld %2s |%9.1f %9.1f %6.2f |%9.1f %9.1f %6.2f |%9.1f %9.1f %6.2f\n",
                s.name.c_str(), (long long)s.m, (long long)s.n, (long long)s.k, op_str(s), gf[0][0], gf[0][1],
                gf[0][1] / gf[0][0], gf[1][0], gf[1][1], gf[1][1] / gf[1][0], gf[2][0], gf[2][1], gf[2][1] / gf[2][0]);
    std::fflush(stdout);
    auto& r = report.add("sgemm", s.name).num("m", s.m).num("n", s.n).num("k", s.k).str("op", op_str(s));
    for (int mode = 0; mode < 3; ++mode)
      r.num(std::string(modes[mode]) + "_openblas_gflops", gf[mode][0])
          .num(std::string(modes[mode]) + "_blis_gflops", gf[mode][1])
          .num(std::string(modes[mode]) + "_blis_over_openblas", gf[mode][1] / gf[mode][0]);
  }
  if (shapes.empty()) return 0;
  std::printf("\nmedians over %zu shapes (peak: 1 core for 1t, x %d for split/own):\n", shapes.size(), threads);
  for (int mode = 0; mode < 3; ++mode) {
    std::printf("  %-5s blis/openblas %.2f   openblas/peak %.2f   blis/peak %.2f\n", modes[mode],
                median(ratios[mode]), median(ob_peak[mode]), median(blis_peak[mode]));
    report.add("summary", modes[mode]).num("blis_over_openblas", median(ratios[mode]))
        .num("openblas_over_peak", median(ob_peak[mode])).num("blis_over_peak", median(blis_peak[mode]));
  }
  std::printf("largest relative difference between the two results: %.2e\n", worst_diff);
  std::string load_after = load_average();
  std::printf("load average at end: %s\n", load_after.c_str());
  report.meta().num("threads", threads).flag("quick", opt.quick).str("openblas", libs[0].version)
      .str("blis", libs[1].version).str("load_before", load_before).str("load_after", load_after)
      .num("max_rel_diff", worst_diff);
  if (!opt.json_path.empty() && !report.write(opt.json_path)) return 1;
  return 0;
}
