// bench_model: a whole GPT on the CPU. Training tokens/s (AdamW, medians of timed steps
// after warm-up steps), the step's time split per op family (from the opt-in op profiling of
// kernels/ops.h, in separate profiled steps), model FLOPs utilization against the library's
// own sgemm measured in the same run on the model's largest matmul shape, and greedy
// generation with the KV cache at batch 1 and 16. Exits 0 whatever the figures (PASS/MISS
// is printed, never asserted: DESIGN.md section 7).
//   bench_model [--layers N] [--d-model N] [--heads N] [--context N] [--batch N] [--steps N]
//               [--precision f32|bf16|f16] [--threads N] [--quick] [--json PATH]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>

#include "common/anchors.h"
#include "common/model_inputs.h"
#include "core/thread_pool.h"
#include "engine/generate.h"
#include "engine/train_engine.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/gemm_path.h"
#include "kernels/ops.h"
#include "nn/nn.h"

namespace dt::bench {
namespace {

constexpr double kMfuTarget = 0.6;

// The op families of the split; ops not named here are "other" (bias, add, scale, cast...).
const char* family_of(const std::string& op) {
  static const std::map<std::string, const char*> fam = {
      {"matmul", "matmul"},
      {"attention_forward", "attention"},
      {"attention_backward", "attention"},
      {"layernorm_forward", "layernorm"},
      {"layernorm_backward", "layernorm"},
      {"rmsnorm_forward", "layernorm"},
      {"rmsnorm_backward", "layernorm"},
      {"gelu_forward", "gelu"},
      {"gelu_backward", "gelu"},
      {"bias_gelu_forward", "gelu"},
      {"bias_gelu_backward", "gelu"},
      {"silu_forward", "gelu"},
      {"silu_backward", "gelu"},
      {"swiglu_forward", "gelu"},
      {"swiglu_backward", "gelu"},
      {"softmax_forward", "softmax/xent"},
      {"softmax_backward", "softmax/xent"},
      {"cross_entropy_forward", "softmax/xent"},
      {"cross_entropy_backward", "softmax/xent"},
      {"embedding_forward", "embedding"},
      {"embedding_backward", "embedding"},
      {"adamw_update", "optimizer"},
      {"sgd_update", "optimizer"}};
  auto it = fam.find(op);
  return it == fam.end() ? "other" : it->second;
}
const std::vector<std::string> kFamilies = {"matmul", "attention", "layernorm", "gelu", "softmax/xent",
                                            "embedding", "optimizer", "other"};

// Parameters that are the weight of a matmul (the 6N of the FLOP count): 2-D weights but
// the position table; the token table only when tied (it is then the head's weight).
int64_t matmul_params(nn::GPT& m) {
  int64_t n = 0;
  for (nn::Parameter* p : m.parameters()) {
    if (p->value.ndim() != 2 || p->name.rfind("wpe", 0) == 0) continue;
    if (p->name.rfind("wte", 0) == 0 && !m.config().tied_embeddings) continue;
    n += p->value.numel();
  }
  return n;
}

}  // namespace
}  // namespace dt::bench

int main(int argc, char** argv) {
  using namespace dt;
  using namespace dt::bench;
  const std::string usage =
      "usage: bench_model [--layers N] [--d-model N] [--heads N] [--context N] [--batch N]\n"
      "                   [--steps N] [--precision f32|bf16|f16] [--threads N] [--quick] [--json PATH]\n"
      "  default: gpt-small (6 layers, d_model 384, 6 heads, context 256, byte vocab, GELU,\n"
      "  LayerNorm, learned positions), batch 8, 10 timed steps after 2 warm-up steps\n"
      "  --quick   tiny config (2 layers, d_model 64, 2 heads, context 64, batch 4; < 20 s)\n"
      "  --filter S  sections whose name contains S besides training (always): split, generate;\n"
      "              e.g. --filter train runs training alone (bench/compare_pytorch.py does)\n";
  Options opt = parse_args(argc, argv, usage, {"layers", "d-model", "heads", "context", "batch", "steps", "precision"});
  if (opt.threads > 0) set_kernel_threads(opt.threads);
  const int threads = kernel_threads();
  auto flag = [&](const char* k, int64_t def) { return positive_flag(opt, k, def, usage, "bench_model"); };
  // The defaults are gpt-small.
  nn::GPTConfig cfg = gpt_from_flags(opt, opt.quick ? GptShape{2, 64, 2, 64} : GptShape{6, 384, 6, 256},
                                          usage, "bench_model");
  // Storage of weights, grads and activations (math is f32 in every kernel): bf16 halves
  // the bytes each op moves; the sgemm anchor below stays f32, so MFU is against it.
  const std::string precision = option_value(opt, "precision", "f32");
  if (precision == "bf16" || precision == "f16") {
    cfg.dtype = precision == "bf16" ? DType::BF16 : DType::F16;
  } else if (precision != "f32") {
    std::fprintf(stderr, "bench_model: --precision %s; accepted: f32, bf16, f16\n%s", precision.c_str(), usage.c_str());
    return 2;
  }
  const int64_t B = flag("batch", opt.quick ? 4 : 8), T = cfg.context;
  const int steps = static_cast<int>(flag("steps", opt.quick ? 3 : 10)), warmup = opt.quick ? 1 : 2;
  if (cfg.context <= 16) {
    std::fprintf(stderr, "bench_model: --context must exceed the 16-token generation prompt\n");
    return 2;
  }
  bool custom = false;
  for (const char* k : {"layers", "d-model", "heads", "context"}) custom |= !option_value(opt, k, "").empty();
  const std::string name = custom ? "custom" : opt.quick ? "quick" : "gpt-small";
  Report report("bench_model");
  std::string load_before = load_average();
  std::printf("bench_model: %s (%s), batch %lld x %lld tokens, %d kernel thread%s, blas %s\n", name.c_str(),
              cfg.str().c_str(), static_cast<long long>(B), static_cast<long long>(T), threads,
              threads == 1 ? "" : "s", kernels::cpu::blas_name());
  std::printf("load average at start: %s\n\n", load_before.c_str());
  bool failed = false;
  try {
    progress("anchors", 1, 1, "fma peak");
    FmaPeak fma = measure_fma_peak(true);
    report_anchors(fma, threads, {}, report);

    // ---- training ---------------------------------------------------------------------------
    nn::GPT model(cfg);
    const int64_t n_params = model.num_parameters(), n_mm = matmul_params(model);
    optim::AdamW adamw(model.parameters(), optim::AdamWOptions{});
    engine::TrainOptions to;
    to.max_grad_norm = 1.0;
    engine::TrainEngine eng(nullptr, model, adamw, to);
    Batch batch = random_batch(B, T, cfg.vocab_size, 7);
    // The MFU anchor: the library's sgemm on the model's largest matmul (MLP up, forward),
    // timed 3 times after every timed training step, so that both see the same machine load.
    const int64_t dff = cfg.resolved().d_ff, M = B * T;
    Tensor a = Tensor::zeros({M, cfg.d_model}, DType::F32), w = Tensor::zeros({cfg.d_model, dff}, DType::F32),
           c = Tensor::zeros({M, dff}, DType::F32);
    kernels::fill(a, 0.01f);
    kernels::fill(w, 0.02f);
    std::vector<double> gemm_s;
    auto time_gemm = [&](bool keep) {
      for (int r = 0; r < 3; ++r) {
        double t0 = now_s();
        kernels::matmul(a, w, c, false, false);
        if (keep) gemm_s.push_back(now_s() - t0);
      }
    };
    time_gemm(false);  // warm-up
    for (int i = 0; i < warmup; ++i) {
      progress("train", i + 1, warmup + steps, "warm-up step");
      eng.train_step(batch.in, batch.tg);
    }
    std::vector<double> step_s;
    for (int i = 0; i < steps; ++i) {
      progress("train", warmup + i + 1, warmup + steps, "timed step");
      double t0 = now_s();
      eng.train_step(batch.in, batch.tg);
      step_s.push_back(now_s() - t0);
      time_gemm(true);
    }
    const double step_med = median(step_s), tok_s = static_cast<double>(B * T) / step_med;
    std::printf("\ntraining: %.4g tokens/s (median step %.1f ms over %d steps; min %.1f, max %.1f)\n", tok_s,
                step_med * 1e3, steps, *std::min_element(step_s.begin(), step_s.end()) * 1e3,
                *std::max_element(step_s.begin(), step_s.end()) * 1e3);
    report.add("train", "step").num("tokens_per_s", tok_s).num("step_median_s", step_med).num("steps", steps)
        .num("batch", static_cast<double>(B)).num("context", static_cast<double>(T))
        .num("params", static_cast<double>(n_params)).num("matmul_params", static_cast<double>(n_mm));

    // ---- split per op family: separate steps with op profiling on ---------------------------
    double matmul_frac = -1;  // the matmul family's share of a profiled step
    if (selected(opt, "split")) {
      const int prof_steps = opt.quick ? 2 : std::max(3, steps / 2);
      std::map<std::string, std::vector<double>> fam_s, other_ops_s;  // other_ops: the ops in "other", by name
      std::vector<double> prof_step_s;
      kernels::set_op_profiling(true);
      for (int i = 0; i < prof_steps; ++i) {
        progress("split", i + 1, prof_steps, "profiled step");
        kernels::reset_op_profile();
        double t0 = now_s();
        eng.train_step(batch.in, batch.tg);
        double total = now_s() - t0, in_ops = 0;
        prof_step_s.push_back(total);
        std::map<std::string, double> f;
        for (const kernels::OpProfileEntry& e : kernels::op_profile()) {
          f[family_of(e.name)] += e.seconds;
          in_ops += e.seconds;
          if (std::string(family_of(e.name)) == "other") other_ops_s[e.name].push_back(e.seconds);
        }
        f["other"] += total - in_ops;  // outside any op: engine, allocation, copies
        for (const std::string& k : kFamilies) fam_s[k].push_back(f[k]);
      }
      kernels::set_op_profiling(false);
      const double prof_med = median(prof_step_s);
      std::printf("\nsplit of a step (op profiling on, median of %d steps of %.1f ms; off: %.1f ms):\n", prof_steps,
                  prof_med * 1e3, step_med * 1e3);
      Report::Record& split = report.add("split", "families").num("profiled_step_median_s", prof_med);
      for (const std::string& k : kFamilies) {
        double s = median(fam_s[k]);
        std::printf("  %-13s %8.2f ms  %5.1f%%\n", k.c_str(), s * 1e3, 100.0 * s / prof_med);
        split.num(k + "_s", s).num(k + "_frac", s / prof_med);
        if (k == "matmul") matmul_frac = s / prof_med;
      }
      std::printf("  other, in ops:");
      for (auto& [op_name, v] : other_ops_s) {
        double s = median(v);
        if (s * 1e3 >= 0.1) std::printf(" %s %.1f ms;", op_name.c_str(), s * 1e3);
        split.num("op_" + op_name + "_s", s);
      }
      std::printf(" the rest outside ops (engine, allocation)\n");
    }

    // ---- MFU against the library's sgemm on the largest matmul (timed with the steps) ----------
    const double sgemm_gflops = 2.0 * M * cfg.d_model * dff / median(gemm_s) * 1e-9;
    const double L = cfg.n_layer, d = cfg.d_model;
    const double flops_causal = 6.0 * n_mm + 6.0 * L * d * T;   // attention: causal half of 12·L·d·T
    const double flops_full = 6.0 * n_mm + 12.0 * L * d * T;    // PaLM's convention (no mask saving)
    const double mfu = flops_causal * tok_s * 1e-9 / sgemm_gflops;
    const double mfu_full = flops_full * tok_s * 1e-9 / sgemm_gflops;
    std::printf("\nsgemm [%lld x %lld] x [%lld x %lld], interleaved with the timed steps: %.1f GFLOP/s (%d threads; "
                "%.2f x the 1-core FMA peak)\n",
                static_cast<long long>(M), static_cast<long long>(cfg.d_model), static_cast<long long>(cfg.d_model),
                static_cast<long long>(dff), sgemm_gflops, threads, sgemm_gflops / fma.median_gflops);
    std::printf("model FLOPs/token: 6 x %lld matmul params + 6·L·d·T (causal attention) = %.4g\n",
                static_cast<long long>(n_mm), flops_causal);
    std::printf("model: %.1f GFLOP/s; MFU vs sgemm = %.3f (target >= %.1f: %s); with 12·L·d·T: %.3f\n",
                flops_causal * tok_s * 1e-9, mfu, kMfuTarget, mfu >= kMfuTarget ? "PASS" : "MISS", mfu_full);
    const double peak = fma.median_gflops * threads, mfu_peak = flops_causal * tok_s * 1e-9 / peak;
    std::printf("model: MFU vs the FMA peak (%.0f GFLOP/s = 1-core median x %d threads) = %.3f\n", peak, threads,
                mfu_peak);
    report.add("mfu", "sgemm_largest").num("sgemm_gflops", sgemm_gflops).num("flops_per_token", flops_causal)
        .num("flops_per_token_full_attn", flops_full).num("mfu", mfu).num("mfu_full_attn", mfu_full)
        .num("target", kMfuTarget).flag("pass", mfu >= kMfuTarget);
    report.add("mfu", "fma_peak").num("peak_gflops", peak).num("mfu", mfu_peak);
    // Against the peak of the path this precision's matmuls take: AMX tiles for bf16 where
    // gemm_path.h chose them, else the FMA peak (f32, and bf16 widened or on AVX512-BF16,
    // whose dot product never beats FMA where it is chosen against it).
    const kernels::cpu::GemmChoice& path = kernels::cpu::gemm_choice();
    if (cfg.dtype == DType::BF16 && path.bf16_amx) {
      const FmaPeak amx = measure_amx_bf16_peak(true);
      const double amx_peak = amx.median_gflops * threads, mfu_amx = flops_causal * tok_s * 1e-9 / amx_peak;
      std::printf("model: MFU vs the AMX bf16 peak (%.0f GFLOP/s = 1-core tile loop x %d threads) = %.3f\n", amx_peak,
                  threads, mfu_amx);
      report.add("mfu", "path_peak").str("path", path.bf16).num("peak_gflops", amx_peak).num("mfu", mfu_amx);
    } else {
      report.add("mfu", "path_peak").str("path", cfg.dtype == DType::BF16 ? path.bf16 : path.f32)
          .num("peak_gflops", peak).num("mfu", mfu_peak);
    }
    if (matmul_frac >= 0) {
      std::printf("model: share of a step outside matmul = %.1f%% (attention, element-wise ops, optimizer)\n",
                  100.0 * (1.0 - matmul_frac));
      report.add("split", "non_matmul").num("frac", 1.0 - matmul_frac);
    }

    // ---- generation ---------------------------------------------------------------------------
    if (selected(opt, "generate")) {
      const int64_t prompt_len = 16, new_tokens = std::min<int64_t>(64, T - prompt_len);
      std::printf("\ngeneration: greedy, KV cache, prompt %lld tokens, %lld new tokens\n",
                  static_cast<long long>(prompt_len), static_cast<long long>(new_tokens));
      for (int64_t gb : {int64_t{1}, int64_t{16}}) {
        std::vector<std::vector<int32_t>> prompts(gb, std::vector<int32_t>(prompt_len));
        for (int64_t r = 0; r < gb; ++r)
          for (int64_t t = 0; t < prompt_len; ++t) prompts[r][t] = batch.in.data<int32_t>()[(r % B) * T + t + r / B];
        engine::GenerateOptions go;
        go.max_new_tokens = new_tokens;
        const int reps = opt.quick ? 2 : 5;
        std::vector<double> tps, ttft, itl;
        for (int i = 0; i <= reps; ++i) {  // i == 0: warm-up
          progress("generate", i + 1, reps + 1, "batch " + std::to_string(gb));
          engine::GenerateResult res = engine::generate(model, prompts, go);
          if (i == 0) continue;
          tps.push_back(res.stats.tokens_per_s);
          ttft.push_back(res.stats.time_to_first_token_s);
          itl.push_back(res.stats.inter_token_latency_s);
        }
        std::printf("  batch %2lld: %8.1f tokens/s, time to first token %.2f ms, inter-token latency %.2f ms\n",
                    static_cast<long long>(gb), median(tps), median(ttft) * 1e3, median(itl) * 1e3);
        report.add("generate", "batch" + std::to_string(gb)).num("tokens_per_s", median(tps))
            .num("ttft_s", median(ttft)).num("itl_s", median(itl)).num("new_tokens", static_cast<double>(new_tokens));
        if (gb != 1) continue;
        // Batch 1 decodes one token per pass over every parameter: the bound is the memory
        // bandwidth (memcpy's read + write rate on the same threads, measured now) over the
        // parameter bytes. The KV cache adds a little on top, ignored here.
        const double param_bytes = static_cast<double>(n_params) * (precision == "f32" ? 4.0 : 2.0);
        std::vector<CopyBandwidth> bw = measure_copy_bandwidth(size_t{256} << 20, {threads}, opt.quick);
        if (bw.empty()) continue;
        const double bound_tps = bw[0].median_gbps * 1e9 / param_bytes, got_tps = 1.0 / median(itl);
        std::printf("  batch  1 decode: %.0f tokens/s (1 / inter-token latency) against the bandwidth bound %.0f "
                    "(memcpy %.1f GB/s over %.1f MB of parameters): %.2f of the bound\n",
                    got_tps, bound_tps, bw[0].median_gbps, param_bytes / 1e6, got_tps / bound_tps);
        report.add("generate", "batch1_bandwidth_bound").num("memcpy_gbps", bw[0].median_gbps)
            .num("param_bytes", param_bytes).num("bound_tokens_per_s", bound_tps).num("decode_tokens_per_s", got_tps)
            .num("fraction_of_bound", got_tps / bound_tps);
      }
    }
  } catch (const std::exception& e) {
    std::printf("failed: %s\n", e.what());
    report.note("model", "failed", e.what());
    failed = true;
  }
  std::string load_after = load_average();
  std::printf("\nload average at end: %s\n", load_after.c_str());
  report.meta().num("threads", threads).flag("quick", opt.quick).str("config", name).str("model", cfg.str())
      .str("blas", kernels::cpu::blas_name()).str("load_before", load_before).str("load_after", load_after)
      .flag("failed", failed);
  if (!opt.json_path.empty() && !report.write(opt.json_path)) return 1;
  return failed ? 1 : 0;
}
