// bench_blas_choice: oneDNN (libdtrain's default GEMM backend), OpenBLAS and BLIS, all as
// Debian ships them, on the sgemm shapes of a small GPT and of the CPU attention's tiles, in
// one process, next to the single-core FMA peak measured in the same run. OpenBLAS is the
// anchor every library's speed is divided by (the backend before oneDNN).
// Three ways to run each shape:
//   1t    : the library set to 1 thread, the whole problem;
//   split : the library set to 1 thread, the larger of M and N split in halves over a
//           blocking pool of N threads (default 2): what libdtrain's kernels do, so the
//           library fastest here (median over shapes) is printed as the "choice";
//   own   : the library's own threading set to N threads, the whole problem.
// The attention tiles (attn.*) are never split by libdtrain: its attention hands whole tiles
// to the pool threads, each run as '1t'. Their 'split' figure times mostly the pool's wake-up
// (tens of microseconds on a VM whose other vCPU is idle, against a ~20 us call).
// OpenBLAS and BLIS are called through cblas_sgemm, each loaded with dlopen(RTLD_LOCAL |
// RTLD_DEEPBIND). DEEPBIND keeps each library's internal calls inside it: BLIS's cblas_sgemm
// calls sgemm_ through the PLT, and were another BLAS in the global scope (a benchmark that
// calls dt::kernels built with DTRAIN_BLAS=openblas links it), that sgemm_ would win and
// "BLIS" would silently run OpenBLAS. Check with: LD_DEBUG=bindings bench_blas_choice --quick 2>&1 | grep "sgemm_'".
// oneDNN is called through dnnl_sgemm, its own JIT code with no BLAS symbol to capture, so it
// is loaded without DEEPBIND. Debian builds it on OpenMP: its thread count is the calling
// thread's OpenMP team size (omp_set_num_threads, per thread), set as
// kernels/cpu/blas/onednn.cc does.
//   bench_blas_choice [--threads N] [--quick] [--json PATH] [--filter S]
//                     [--onednn PATH] [--openblas PATH] [--blis PATH]
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/anchors.h"
#include "common/gpt_shapes.h"
#include "core/thread_pool.h"

namespace dt::bench {
namespace {

// The CBLAS enum values (identical in every cblas.h).
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
using CblasSgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float,
                              float*, int);
// dnnl_sgemm (row-major; returns dnnl_status_t, 0 on success) and dnnl_version_t, mirrored
// here so that the benchmark builds without oneDNN's headers.
using DnnlSgemmFn = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                            int64_t, float, float*, int64_t);
struct DnnlVersion {
  int major, minor, patch;
  const char* hash;
};

// Whether this thread has set its OpenMP team size for oneDNN. One that never did forks a
// team of every core on its first call: the 'split' pool threads set 1 there (see gemm).
thread_local bool omp_team_set = false;

struct Blas {
  std::string name, path, version;
  CblasSgemmFn cblas_sgemm = nullptr;          // OpenBLAS, BLIS
  DnnlSgemmFn dnnl_sgemm = nullptr;            // oneDNN
  void (*set_threads_int)(int) = nullptr;      // openblas_set_num_threads; omp_set_num_threads for oneDNN
  void (*set_threads_i64)(int64_t) = nullptr;  // bli_thread_set_num_threads
  void set_threads(int n) const {
    if (set_threads_int) set_threads_int(n);
    if (set_threads_i64) set_threads_i64(n);
    if (dnnl_sgemm) omp_team_set = true;
  }
  void gemm(const GemmShape& s, int64_t m, int64_t n, const float* a, const float* b, float* c) const {
    if (dnnl_sgemm) {
      if (!omp_team_set) set_threads(1);
      int st = dnnl_sgemm(s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N', m, n, s.k, 1.0f, a, s.lda(), b, s.ldb(),
                          0.0f, c, s.ldc());
      if (st != 0) std::fprintf(stderr, "error: dnnl_sgemm on %s returned status %d\n", s.name.c_str(), st);
      return;
    }
    cblas_sgemm(kRowMajor, s.trans_a ? kTrans : kNoTrans, s.trans_b ? kTrans : kNoTrans, static_cast<int>(m),
                static_cast<int>(n), static_cast<int>(s.k), 1.0f, a, static_cast<int>(s.lda()), b,
                static_cast<int>(s.ldb()), 0.0f, c, static_cast<int>(s.ldc()));
  }
};

void* open_library(const std::string& path, int flags) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | flags);
  if (!h) std::fprintf(stderr, "error: dlopen %s: %s\n", path.c_str(), dlerror());
  return h;
}

bool load_cblas(Blas& lib, const char* set_threads_symbol, const char* version_symbol) {
  void* h = open_library(lib.path, RTLD_DEEPBIND);
  if (!h) return false;
  lib.cblas_sgemm = reinterpret_cast<CblasSgemmFn>(dlsym(h, "cblas_sgemm"));
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
  if (!lib.cblas_sgemm || !st) {
    std::fprintf(stderr, "error: %s lacks cblas_sgemm or %s\n", lib.path.c_str(), set_threads_symbol);
    return false;
  }
  return true;
}

bool load_onednn(Blas& lib) {
  void* h = open_library(lib.path, 0);
  void* gomp = h ? open_library("libgomp.so.1", 0) : nullptr;  // already loaded by oneDNN: the same copy
  if (!gomp) return false;
  lib.dnnl_sgemm = reinterpret_cast<DnnlSgemmFn>(dlsym(h, "dnnl_sgemm"));
  lib.set_threads_int = reinterpret_cast<void (*)(int)>(dlsym(gomp, "omp_set_num_threads"));
  if (!lib.dnnl_sgemm || !lib.set_threads_int) {
    std::fprintf(stderr, "error: %s lacks dnnl_sgemm, or libgomp.so.1 omp_set_num_threads\n", lib.path.c_str());
    return false;
  }
  auto version = reinterpret_cast<const DnnlVersion* (*)()>(dlsym(h, "dnnl_version"));
  const DnnlVersion* v = version ? version() : nullptr;
  lib.version = v ? "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                        std::to_string(v->patch) + " (" + (v->hash ? v->hash : "?") + ")"
                  : "?";
  // The instruction set its JIT kernels target on this CPU (dnnl_cpu_isa_t values).
  if (auto isa = reinterpret_cast<int (*)()>(dlsym(h, "dnnl_get_effective_cpu_isa"))) {
    const std::pair<int, const char*> names[] = {{0x7, "avx2"}, {0x27, "avx512_core"}, {0x67, "avx512_core_vnni"},
                                                 {0xe7, "avx512_core_bf16"}, {0x3e7, "avx512_core_amx"}};
    char isa_name[32];
    std::snprintf(isa_name, sizeof isa_name, "0x%x", isa());
    for (const auto& [value, name] : names)
      if (value == isa()) std::snprintf(isa_name, sizeof isa_name, "%s", name);
    lib.version += std::string(", isa ") + isa_name;
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
      if (split_m) lib.gemm(s, hi - lo, s.n, s.trans_a ? a + lo : a + lo * s.lda(), b, c + lo * s.ldc());
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
      "usage: bench_blas_choice [--threads N] [--quick] [--json PATH] [--filter S] [--onednn PATH]\n"
      "                         [--openblas PATH] [--blis PATH]\n"
      "  --threads N      threads of the 'split' and 'own' runs (default 2)\n"
      "  --quick          T=1024, d=384 and attention kend=256 only, few runs\n"
      "  --json PATH      also write every figure to PATH as JSON\n"
      "  --filter S       only shapes whose name contains S, e.g. T4096.d768 or attn\n"
      "  --onednn PATH    default /usr/lib/x86_64-linux-gnu/libdnnl.so.2\n"
      "  --openblas PATH  default /usr/lib/x86_64-linux-gnu/libopenblas.so.0\n"
      "  --blis PATH      default /usr/lib/x86_64-linux-gnu/libblis.so.4\n";
  Options opt = parse_args(argc, argv, usage, {"onednn", "openblas", "blis"});
  const int threads = opt.threads > 0 ? opt.threads : 2;
  constexpr int kLibs = 3, kAnchor = 1;  // libs[kAnchor] = openblas: ratios are over it
  Blas libs[kLibs];
  libs[0].name = "onednn", libs[0].path = option_value(opt, "onednn", "/usr/lib/x86_64-linux-gnu/libdnnl.so.2");
  libs[1].name = "openblas", libs[1].path = option_value(opt, "openblas", "/usr/lib/x86_64-linux-gnu/libopenblas.so.0");
  libs[2].name = "blis", libs[2].path = option_value(opt, "blis", "/usr/lib/x86_64-linux-gnu/libblis.so.4");
  if (!load_onednn(libs[0]) || !load_cblas(libs[1], "openblas_set_num_threads", "openblas_get_config") ||
      !load_cblas(libs[2], "bli_thread_set_num_threads", "bli_info_get_version_str"))
    return 1;
  for (auto& lib : libs) lib.set_threads(1);

  Report report("bench_blas_choice");
  std::string load_before = load_average();
  std::printf("bench_blas_choice: %d threads for split/own; medians after a warm-up\n", threads);
  for (const auto& lib : libs) std::printf("  %-8s %s\n", lib.name.c_str(), lib.version.c_str());
  std::printf("load average at start: %s\n", load_before.c_str());
  FmaPeak fma = measure_fma_peak(opt.quick);
  std::printf("fma peak, 1 core (%s): %.1f GFLOP/s [best %.1f]; x %d threads = %.1f\n\n", fma.isa.c_str(),
              fma.median_gflops, fma.best_gflops, threads, fma.median_gflops * threads);
  report.anchors().str("fma_isa", fma.isa).num("fma_peak_gflops_1core", fma.median_gflops)
      .num("fma_peak_gflops_1core_best", fma.best_gflops);

  std::vector<GemmShape> shapes;
  for (const auto& list : {gpt_gemm_shapes(opt.quick), attention_tile_shapes(opt.quick)})
    for (const auto& s : list)
      if (selected(opt, s.name)) shapes.push_back(s);
  const char* modes[3] = {"1t", "split", "own"};
  std::printf("GFLOP/s of each library; dnn/ob = onednn / openblas, bli/ob = blis / openblas; split/own: %d threads\n",
              threads);
  std::printf("%-20s %5s %5s %5s %2s", "", "", "", "", "");
  for (int mode = 0; mode < 3; ++mode) std::printf(mode < 2 ? " | %-38s" : " | %s", modes[mode]);
  std::printf("\n%-20s %5s %5s %5s %2s", "shape", "M", "N", "K", "op");
  for (int mode = 0; mode < 3; ++mode) std::printf(" | %8s %8s %6s %6s %6s", "onednn", "openblas", "blis", "dnn/ob", "bli/ob");
  std::printf("\n");
  Budget budget = opt.quick ? Budget{0.05, 3, 5} : Budget{0.6, 5, 15};
  dt::ThreadPool pool(threads);
  std::vector<double> over_anchor[3][kLibs], over_peak[3][kLibs];
  double worst_diff[kLibs] = {};
  int index = 0;
  for (const auto& s : shapes) {
    progress("blas", ++index, static_cast<int>(shapes.size()), s.name);
    std::vector<float> a(s.a_size()), b(s.b_size());
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 40503u) % 2003) / 1000.0f - 1.0f;
    std::vector<std::vector<float>> c(kLibs, std::vector<float>(s.c_size()));
    double gf[3][kLibs];
    for (int mode = 0; mode < 3; ++mode) {
      std::vector<Stats> st(kLibs);
      if (mode < 2) {  // one thread per library call: interleave the libraries run by run
        std::vector<std::function<void()>> fns;
        for (int l = 0; l < kLibs; ++l)
          fns.push_back(mode == 0 ? std::function<void()>([&, l] { libs[l].gemm(s, s.m, s.n, a.data(), b.data(), c[l].data()); })
                                  : std::function<void()>([&, l] { gemm_split(libs[l], pool, threads, s, a.data(), b.data(), c[l].data()); }));
        st = time_interleaved(fns, budget);
      } else {  // the libraries' own threads may spin after a call: one library at a time, then a pause
        for (int turn = 0; turn < kLibs; ++turn) {
          int l = (index + turn) % kLibs;
          libs[l].set_threads(threads);
          st[l] = time_one([&] { libs[l].gemm(s, s.m, s.n, a.data(), b.data(), c[l].data()); }, budget);
          libs[l].set_threads(1);
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
        }
      }
      double peak = fma.median_gflops * (mode == 0 ? 1 : threads);
      for (int l = 0; l < kLibs; ++l) gf[mode][l] = s.flops() / st[l].median_s / 1e9;
      for (int l = 0; l < kLibs; ++l) {
        over_anchor[mode][l].push_back(gf[mode][l] / gf[mode][kAnchor]);
        over_peak[mode][l].push_back(gf[mode][l] / peak);
        worst_diff[l] = std::max(worst_diff[l], max_rel_diff(c[kAnchor], c[l]));  // every mode's result
      }
    }
    std::printf("%-20s %5lld %5lld %5lld %2s", s.name.c_str(), (long long)s.m, (long long)s.n, (long long)s.k, op_str(s));
    for (int mode = 0; mode < 3; ++mode)
      std::printf(" | %8.1f %8.1f %6.1f %6.2f %6.2f", gf[mode][0], gf[mode][1], gf[mode][2],
                  gf[mode][0] / gf[mode][kAnchor], gf[mode][2] / gf[mode][kAnchor]);
    std::printf("\n");
    std::fflush(stdout);
    auto& r = report.add("sgemm", s.name).num("m", s.m).num("n", s.n).num("k", s.k).str("op", op_str(s))
                  .num("lda", s.lda()).num("ldb", s.ldb()).num("ldc", s.ldc());
    for (int mode = 0; mode < 3; ++mode)
      for (int l = 0; l < kLibs; ++l) {
        std::string key = std::string(modes[mode]) + "_" + libs[l].name;
        r.num(key + "_gflops", gf[mode][l]).num(key + "_over_openblas", gf[mode][l] / gf[mode][kAnchor]);
      }
  }
  if (shapes.empty()) return 0;
  std::printf("\nmedians over %zu shapes (peak: 1 core for 1t, x %d for split/own):\n", shapes.size(), threads);
  int choice = kAnchor;
  for (int mode = 0; mode < 3; ++mode) {
    auto& rs = report.add("summary", modes[mode]);
    std::printf("  %-5s", modes[mode]);
    for (int l = 0; l < kLibs; ++l)
      if (l != kAnchor) std::printf("  %s/openblas %.2f", libs[l].name.c_str(), median(over_anchor[mode][l]));
    std::printf("  |");
    for (int l = 0; l < kLibs; ++l) {
      std::printf("  %s/peak %.2f", libs[l].name.c_str(), median(over_peak[mode][l]));
      rs.num(libs[l].name + "_over_openblas", median(over_anchor[mode][l]))
          .num(libs[l].name + "_over_peak", median(over_peak[mode][l]));
      if (mode == 1 && median(over_anchor[mode][l]) > median(over_anchor[mode][choice])) choice = l;
    }
    std::printf("\n");
  }
  std::printf("choice (split mode, median over shapes): %s\n", libs[choice].name.c_str());
  std::printf("largest relative difference from openblas's result (every mode):");
  for (int l = 0; l < kLibs; ++l)
    if (l != kAnchor) std::printf("  %s %.2e", libs[l].name.c_str(), worst_diff[l]);
  std::printf("\n");
  std::string load_after = load_average();
  std::printf("load average at end: %s\n", load_after.c_str());
  auto& meta = report.meta().num("threads", threads).flag("quick", opt.quick).str("choice", libs[choice].name)
                   .str("load_before", load_before).str("load_after", load_after);
  for (int l = 0; l < kLibs; ++l) {
    meta.str(libs[l].name, libs[l].version);
    if (l != kAnchor) meta.num("max_rel_diff_" + libs[l].name, worst_diff[l]);
  }
  if (!opt.json_path.empty() && !report.write(opt.json_path)) return 1;
  return 0;
}
