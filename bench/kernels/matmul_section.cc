// matmul: dt::kernels::matmul (f32 and bf16) on the GPT shapes, next to the BLAS it calls
//  - split: cpu::sgemm over the kernel pool with the library's own split (as
//    kernels/cpu/matmul.cc: the larger of M and N in blocks of >= 64 lines, one per
//    thread), i.e. the library minus validation and dispatch;
//  - 1t: cpu::sgemm on the whole problem on one thread;
// and next to the FMA peak x kernel threads.
#include <algorithm>
#include <cstdio>

#include "common/gpt_shapes.h"
#include "core/random_fill.h"
#include "core/thread_pool.h"
#include "kernels/cpu/blas.h"
#include "kernels/ops.h"
#include "kernels/sections.h"

namespace dt::bench {
namespace {

void sgemm_split(const GemmShape& s, const float* a, const float* b, float* c) {
  bool split_m = s.m >= s.n;
  int64_t lines = split_m ? s.m : s.n;
  int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(lines / 64, kernel_pool().size()));
  parallel_for(blocks, 1, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      int64_t lo = lines * j / blocks, hi = lines * (j + 1) / blocks;
      if (split_m) {
        const float* ab = s.trans_a ? a + lo : a + lo * s.lda();
        kernels::cpu::sgemm(s.trans_a, s.trans_b, hi - lo, s.n, s.k, 1.0f, ab, s.lda(), b, s.ldb(), 0.0f,
                            c + lo * s.n, s.n);
      } else {
        const float* bb = s.trans_b ? b + lo * s.ldb() : b + lo;
        kernels::cpu::sgemm(s.trans_a, s.trans_b, s.m, hi - lo, s.k, 1.0f, a, s.lda(), bb, s.ldb(), 0.0f, c + lo,
                            s.n);
      }
    }
  });
}

const char* op_str(const GemmShape& s) { return s.trans_a ? "TN" : s.trans_b ? "NT" : "NN"; }

}  // namespace

void bench_matmul(Context& ctx) {
  std::vector<GemmShape> shapes;
  for (const auto& s : gpt_gemm_shapes(ctx.opt.quick))
    if (selected(ctx.opt, "matmul/" + s.name)) shapes.push_back(s);
  if (shapes.empty()) return;
  const double peak = ctx.peak_gflops();
  std::printf("\n== matmul, GFLOP/s (blas: %s; peak = fma x %d threads = %.0f)\n", kernels::cpu::blas_name(),
              ctx.threads, peak);
  std::printf("   lib = dt::kernels::matmul; split = sgemm over the pool with the library's split;\n"
              "   1t = sgemm on the whole problem, one thread\n");
  std::printf("%-22s %5s %5s %5s %2s %8s %8s %8s %8s %9s %7s %8s %9s\n", "shape", "M", "N", "K", "op", "lib f32",
              "lib bf16", "split", "1t", "lib/split", "lib/1t", "lib/peak", "bf16/peak");
  Budget budget = ctx.opt.quick ? Budget{0.05, 3, 5} : Budget{0.6, 5, 25};
  std::vector<double> r_split, r_1t, r_peak, r_bf16_peak;
  guarded(ctx, "matmul", [&] {
    int index = 0;
    for (const auto& s : shapes) {
      progress("matmul", ++index, static_cast<int>(shapes.size()), s.name);
      Tensor a = Tensor::uninit({s.a_rows(), s.a_cols()}, DType::F32);
      Tensor b = Tensor::uninit({s.b_rows(), s.b_cols()}, DType::F32);
      Tensor c = Tensor::uninit({s.m, s.n}, DType::F32);
      fill_random(a, Distribution::Uniform, 1, "a", 0, -1.0f, 1.0f);
      fill_random(b, Distribution::Uniform, 1, "b", 0, -1.0f, 1.0f);
      Tensor a16 = Tensor::uninit(a.shape(), DType::BF16), b16 = Tensor::uninit(b.shape(), DType::BF16);
      Tensor c16 = Tensor::uninit(c.shape(), DType::BF16);
      kernels::cast(a, a16);
      kernels::cast(b, b16);
      const float *pa = a.data<float>(), *pb = b.data<float>();
      float* pc = c.data<float>();
      auto st = time_interleaved(
          {[&] { kernels::matmul(a, b, c, s.trans_a, s.trans_b); },
           [&] { kernels::matmul(a16, b16, c16, s.trans_a, s.trans_b); },
           [&] { sgemm_split(s, pa, pb, pc); },
           [&] {
             kernels::cpu::sgemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, pa, s.lda(), pb, s.ldb(), 0.0f, pc, s.n);
           }},
          budget);
      double lib = s.flops() / st[0].median_s / 1e9, bf16 = s.flops() / st[1].median_s / 1e9;
      double split = s.flops() / st[2].median_s / 1e9, one = s.flops() / st[3].median_s / 1e9;
      r_split.push_back(lib / split);
      r_1t.push_back(lib / one);
      r_peak.push_back(lib / peak);
      r_bf16_peak.push_back(bf16 / peak);
      std::printf("%-22s %5lld %5lld %5lld %2s %8.1f %8.1f %8.1f %8.1f %9.2f %7.2f %8.2f %9.2f\n", s.name.c_str(),
                  static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k), op_str(s), lib,
                  bf16, split, one, lib / split, lib / one, lib / peak, bf16 / peak);
      std::fflush(stdout);
      ctx.report.add("matmul", s.name)
          .num("m", s.m).num("n", s.n).num("k", s.k).str("op", op_str(s))
          .num("lib_f32_gflops", lib).num("lib_bf16_gflops", bf16)
          .num("split_sgemm_gflops", split).num("sgemm_1t_gflops", one)
          .num("lib_over_split", lib / split).num("lib_over_1t", lib / one)
          .num("lib_over_peak", lib / peak).num("bf16_over_peak", bf16 / peak)
          .num("reps", st[0].reps);
    }
  });
  if (r_split.empty()) return;
  std::printf("median over %zu shapes: lib/split %.2f, lib/1t %.2f, lib/peak %.2f, bf16/peak %.2f\n", r_split.size(),
              median(r_split), median(r_1t), median(r_peak), median(r_bf16_peak));
  ctx.report.add("matmul_summary", "median")
      .num("shapes", static_cast<double>(r_split.size()))
      .num("lib_over_split", median(r_split)).num("lib_over_1t", median(r_1t))
      .num("lib_over_peak", median(r_peak)).num("bf16_over_peak", median(r_bf16_peak));
}

}  // namespace dt::bench
