// layernorm: dt::kernels::layernorm_forward / _backward on 4096 rows x C, f32. A
// memory-bound op, so the figure is GB/s of the minimum traffic (inputs read once, outputs
// written once; dweight and dbias accumulate, so they are read and written) and its ratio
// to the memcpy anchor at the same thread count. The tensors (<= 16 MiB each) may stay in
// the last-level cache between runs, so the ratio can exceed 1.
#include <cstdio>

#include "core/random_fill.h"
#include "kernels/ops.h"
#include "kernels/sections.h"

namespace dt::bench {
namespace {

struct LnBuffers {
  Tensor x, w, bias, y, mean, rstd, dy, dx, dw, db;
  LnBuffers(int64_t rows, int64_t c) {
    x = Tensor::uninit({rows, c}, DType::F32), dy = Tensor::uninit({rows, c}, DType::F32);
    w = Tensor::uninit({c}, DType::F32), bias = Tensor::uninit({c}, DType::F32);
    fill_random(x, Distribution::Normal, 3, "x", 0, 0.5f, 2.0f);
    fill_random(dy, Distribution::Normal, 3, "dy", 0, 0.0f, 1.0f);
    fill_random(w, Distribution::Normal, 3, "w", 0, 1.0f, 0.1f);
    fill_random(bias, Distribution::Normal, 3, "bias", 0, 0.0f, 0.1f);
    y = Tensor::zeros({rows, c}, DType::F32), dx = Tensor::zeros({rows, c}, DType::F32);
    mean = Tensor::zeros({rows}, DType::F32), rstd = Tensor::zeros({rows}, DType::F32);
    dw = Tensor::zeros({c}, DType::F32), db = Tensor::zeros({c}, DType::F32);
  }
};

void run_pass(Context& ctx, bool backward) {
  const char* pass = backward ? "bwd" : "fwd";
  const int64_t rows = 4096;
  std::vector<int64_t> widths;
  for (int64_t c : {384, 768, 1024})
    if (selected(ctx.opt, strf("layernorm/%s/R%lld.C%lld", pass, (long long)rows, (long long)c))) widths.push_back(c);
  if (widths.empty()) return;
  std::printf("\n== layernorm %s, f32 (memcpy anchor with %d thread%s = %.1f GB/s)\n",
              backward ? "backward" : "forward", ctx.threads, ctx.threads == 1 ? "" : "s", ctx.copy_gbps);
  std::printf("%-22s %10s %8s %9s\n", "shape", "us", "GB/s", "/memcpy");
  Budget budget = ctx.opt.quick ? Budget{0.03, 5, 15} : Budget{0.3, 15, 201};
  std::string section = std::string("layernorm_") + pass;
  guarded(ctx, section, [&] {
    int index = 0;
    for (int64_t c : widths) {
      std::string name = strf("R%lld.C%lld", (long long)rows, (long long)c);
      progress(section, ++index, static_cast<int>(widths.size()), name);
      LnBuffers t(rows, c);
      const float eps = 1e-5f;
      kernels::layernorm_forward(t.x, t.w, t.bias, eps, t.y, t.mean, t.rstd);  // mean, rstd for backward
      Stats st = backward ? time_one([&] {
        kernels::layernorm_backward(t.dy, t.x, t.w, t.mean, t.rstd, t.dx, t.dw, t.db);
      }, budget)
                          : time_one([&] { kernels::layernorm_forward(t.x, t.w, t.bias, eps, t.y, t.mean, t.rstd); },
                                     budget);
      double matrix = 4.0 * rows * c, vec = 4.0 * c, stat = 4.0 * rows;
      // fwd: x, w, bias in; y, mean, rstd out. bwd: dy, x, w, mean, rstd in; dx out; dw, db += .
      double bytes = backward ? 3 * matrix + vec + 2 * stat + 4 * vec : 2 * matrix + 2 * vec + 2 * stat;
      double gbps = bytes / st.median_s / 1e9;
      std::printf("%-22s %10.1f %8.2f %9.2f\n", name.c_str(), st.median_s * 1e6, gbps, gbps / ctx.copy_gbps);
      std::fflush(stdout);
      ctx.report.add(section, name)
          .num("rows", rows).num("c", c).num("median_us", st.median_s * 1e6).num("gbps", gbps)
          .num("over_memcpy", gbps / ctx.copy_gbps).num("reps", st.reps);
    }
  });
}

}  // namespace

void bench_layernorm(Context& ctx) {
  run_pass(ctx, false);
  run_pass(ctx, true);
}

}  // namespace dt::bench
