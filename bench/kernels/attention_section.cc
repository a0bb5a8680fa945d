// attention: dt::kernels::attention_forward / _backward, causal, Tq = Tk = T, f32.
// FLOPs count the useful products over the causal pairs P = T(T+1)/2 per (batch, head):
// forward Q K^T and P V (4 D per pair), backward dV, dP, dQ, dK (8 D per pair); work a
// kernel repeats (recomputing scores in backward) is not counted. Bytes are the minimum
// that must move: every input read once, every output written once.
#include <cstdio>

#include "core/random_fill.h"
#include "kernels/ops.h"
#include "kernels/sections.h"

namespace dt::bench {
namespace {

struct AttnShape {
  int64_t b, t, h, d;
  std::string name() const { return strf("B%lld.T%lld.H%lld.D%lld", (long long)b, (long long)t, (long long)h, (long long)d); }
  double pairs() const { return static_cast<double>(b * h) * static_cast<double>(t) * (t + 1) / 2.0; }
  double tensor_bytes() const { return 4.0 * b * t * h * d; }  // one of q, k, v, out (f32)
  double lse_bytes() const { return 4.0 * b * h * t; }
};

std::vector<AttnShape> attention_shapes(bool quick) {
  if (quick) return {{1, 256, 6, 64}};
  return {{1, 256, 6, 64}, {1, 1024, 6, 64}, {2, 512, 12, 64}, {4, 256, 12, 64}, {4, 1024, 12, 64}};
}

struct AttnBuffers {
  Tensor q, k, v, out, lse, dout, dq, dk, dv;
  explicit AttnBuffers(const AttnShape& s) {
    Shape x{s.b, s.t, s.h, s.d};
    q = Tensor::uninit(x, DType::F32), k = Tensor::uninit(x, DType::F32), v = Tensor::uninit(x, DType::F32);
    dout = Tensor::uninit(x, DType::F32);
    fill_random(q, Distribution::Normal, 2, "q", 0, 0.0f, 1.0f);
    fill_random(k, Distribution::Normal, 2, "k", 0, 0.0f, 1.0f);
    fill_random(v, Distribution::Normal, 2, "v", 0, 0.0f, 1.0f);
    fill_random(dout, Distribution::Normal, 2, "dout", 0, 0.0f, 1.0f);
    out = Tensor::zeros(x, DType::F32), dq = Tensor::zeros(x, DType::F32);
    dk = Tensor::zeros(x, DType::F32), dv = Tensor::zeros(x, DType::F32);
    lse = Tensor::zeros({s.b, s.h, s.t}, DType::F32);
  }
};

void run_pass(Context& ctx, bool backward) {
  const char* pass = backward ? "bwd" : "fwd";
  std::vector<AttnShape> shapes;
  for (const auto& s : attention_shapes(ctx.opt.quick))
    if (selected(ctx.opt, std::string("attention/") + pass + "/" + s.name())) shapes.push_back(s);
  if (shapes.empty()) return;
  std::printf("\n== attention %s, causal, f32 (peak = fma x %d threads = %.0f GFLOP/s)\n",
              backward ? "backward" : "forward", ctx.threads, ctx.peak_gflops());
  std::printf("%-22s %10s %9s %8s %9s\n", "shape", "ms", "GFLOP/s", "GB/s", "/peak");
  Budget budget = ctx.opt.quick ? Budget{0.05, 3, 5} : Budget{0.5, 5, 25};
  std::string section = std::string("attention_") + pass;
  guarded(ctx, section, [&] {
    int index = 0;
    for (const auto& s : shapes) {
      progress(section, ++index, static_cast<int>(shapes.size()), s.name());
      AttnBuffers t(s);
      // The forward also produces out and lse for the backward (and is where an
      // unregistered forward reports itself).
      kernels::attention_forward(t.q, t.k, t.v, 0.0f, t.out, t.lse);
      Stats st = backward ? time_one([&] {
        kernels::attention_backward(t.q, t.k, t.v, t.out, t.lse, t.dout, 0.0f, t.dq, t.dk, t.dv);
      }, budget)
                          : time_one([&] { kernels::attention_forward(t.q, t.k, t.v, 0.0f, t.out, t.lse); }, budget);
      double flops = (backward ? 8.0 : 4.0) * s.d * s.pairs();
      // fwd: q, k, v in, out and lse out; bwd: q, k, v, out, dout and lse in, dq, dk, dv out.
      double bytes = (backward ? 8 : 4) * s.tensor_bytes() + s.lse_bytes();
      double gflops = flops / st.median_s / 1e9, gbps = bytes / st.median_s / 1e9;
      std::printf("%-22s %10.3f %9.1f %8.2f %9.3f\n", s.name().c_str(), st.median_s * 1e3, gflops, gbps,
                  gflops / ctx.peak_gflops());
      std::fflush(stdout);
      ctx.report.add(section, s.name())
          .num("b", s.b).num("t", s.t).num("heads", s.h).num("head_dim", s.d)
          .num("median_ms", st.median_s * 1e3).num("gflops", gflops).num("gbps", gbps)
          .num("over_peak", gflops / ctx.peak_gflops()).num("reps", st.reps);
    }
  });
}

}  // namespace

void bench_attention(Context& ctx) {
  run_pass(ctx, false);
  run_pass(ctx, true);
}

}  // namespace dt::bench
