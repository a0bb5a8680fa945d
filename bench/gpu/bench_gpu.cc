// bench_gpu: the CUDA path on one GPU, each figure beside an anchor measured in the same
// run. GEMM TFLOP/s of kernels::matmul against cuBLAS called directly on the same shapes;
// the fused attention's TFLOP/s (causal FLOPs); training tokens/s and model FLOPs
// utilization of a GPT of about 350M parameters (GPT-2 medium's shape) against the H200's
// dense bf16 peak (--peak-tflops, default 989); greedy decode tokens/s at batch 1 and 64
// with the KV cache. Medians of timed runs after warm-up; exits 0 whatever the figures.
//   bench_gpu [--quick] [--json PATH] [--peak-tflops X] [--layers N] [--batch N]
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "common/bench_util.h"
#include "common/model_inputs.h"
#include "core/device_scope.h"
#include "core/gpu_runtime.h"
#include "core/tensor_copy.h"
#include "engine/generate.h"
#include "engine/train_engine.h"
#include "kernels/ops.h"
#include "nn/nn.h"

namespace dt::bench {
namespace {

const Device kGpu{DeviceType::CUDA, 0};

void sync() { gpu::synchronize(0); }

// Median seconds of fn (synchronized), after one warm-up call.
double time_gpu(const std::function<void()>& fn, int reps) {
  fn();
  sync();
  std::vector<double> s;
  for (int i = 0; i < reps; ++i) {
    double t0 = now_s();
    fn();
    sync();
    s.push_back(now_s() - t0);
  }
  return median(s);
}

void gemm_section(bool quick, Report& report) {
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
  cublasSetStream(h, static_cast<cudaStream_t>(gpu::compute_stream(0)));
  std::vector<int64_t> sizes = quick ? std::vector<int64_t>{2048} : std::vector<int64_t>{4096, 8192};
  int i = 0;
  for (DType dt : {DType::BF16, DType::F32})
    for (int64_t n : sizes) {
      progress("gemm", ++i, 2 * static_cast<int>(sizes.size()), strf("%s %lld", dtype_name(dt), static_cast<long long>(n)));
      Tensor a = Tensor::zeros({n, n}, dt, kGpu), b = Tensor::zeros({n, n}, dt, kGpu), c = Tensor::zeros({n, n}, dt, kGpu);
      kernels::fill(a, 0.01f);
      kernels::fill(b, 0.02f);
      const int reps = quick ? 5 : 20;
      double ours = time_gpu([&] { kernels::matmul(a, b, c, false, true); }, reps);
      cudaDataType_t t = dt == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
      const float one = 1.0f, zero = 0.0f;
      int ni = static_cast<int>(n);
      double direct = time_gpu([&] {
        cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, ni, ni, ni, &one, b.raw(), t, ni, a.raw(), t, ni, &zero, c.raw(), t, ni,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      }, reps);
      double flops = 2.0 * n * n * n;
      std::printf("gemm %s %lld^3: %.1f TFLOP/s; cuBLAS direct %.1f TFLOP/s; ratio %.3f\n", dtype_name(dt),
                  static_cast<long long>(n), flops / ours * 1e-12, flops / direct * 1e-12, direct / ours);
      report.add("gemm", strf("%s_%lld", dtype_name(dt), static_cast<long long>(n)))
          .num("tflops", flops / ours * 1e-12).num("cublas_tflops", flops / direct * 1e-12).num("ratio", direct / ours);
    }
  cublasDestroy(h);
}

void attention_section(bool quick, Report& report) {
  const int64_t B = quick ? 1 : 4, T = quick ? 512 : 2048, H = 16, D = 64;
  progress("attention", 1, 1, strf("bf16 B%lld T%lld H%lld D%lld", static_cast<long long>(B), static_cast<long long>(T),
                                   static_cast<long long>(H), static_cast<long long>(D)));
  Tensor q = Tensor::zeros({B, T, H, D}, DType::BF16, kGpu), out = q, lse = Tensor::zeros({B, H, T}, DType::F32, kGpu);
  out = Tensor::zeros(q.shape(), DType::BF16, kGpu);
  kernels::fill(q, 0.1f);
  Tensor dq = Tensor::zeros(q.shape(), DType::BF16, kGpu), dk = dq, dv = dq;
  dk = Tensor::zeros(q.shape(), DType::BF16, kGpu);
  dv = Tensor::zeros(q.shape(), DType::BF16, kGpu);
  const int reps = quick ? 3 : 10;
  double fwd = time_gpu([&] { kernels::attention_forward(q, q, q, 0.0f, out, lse); }, reps);
  double bwd = time_gpu([&] { kernels::attention_backward(q, q, q, out, lse, out, 0.0f, dq, dk, dv); }, reps);
  double flops = 2.0 * B * H * T * T * D;  // QK^T and PV, causal half of 4·B·H·T²·D
  std::printf("attention forward: %.2f TFLOP/s (%.2f ms); backward: %.2f TFLOP/s (%.2f ms, 2.5x the FLOPs)\n",
              flops / fwd * 1e-12, fwd * 1e3, 2.5 * flops / bwd * 1e-12, bwd * 1e3);
  report.add("attention", "bf16").num("forward_tflops", flops / fwd * 1e-12).num("backward_tflops", 2.5 * flops / bwd * 1e-12)
      .num("forward_s", fwd).num("backward_s", bwd).num("T", static_cast<double>(T));
}

void model_section(bool quick, double peak_tflops, int64_t layers, int64_t batch, Report& report) {
  nn::GPTConfig cfg;
  cfg.n_layer = layers;
  cfg.d_model = quick ? 256 : 1024;
  cfg.n_head = quick ? 4 : 16;
  cfg.context = quick ? 256 : 1024;
  cfg.vocab_size = quick ? 256 : 50304;
  cfg.dtype = DType::BF16;
  ScopedDevice on(kGpu);
  progress("train", 0, 0, "building " + cfg.str());
  nn::GPT model(cfg);
  const int64_t n_params = model.num_parameters();
  optim::AdamW adamw(model.parameters(), optim::AdamWOptions{});
  engine::TrainOptions to;
  to.max_grad_norm = 1.0;
  engine::TrainEngine eng(nullptr, model, adamw, to);
  const int64_t B = batch, T = cfg.context;
  Batch data = random_batch(B, T, cfg.vocab_size, 7);
  const int warmup = 2, steps = quick ? 3 : 6;
  std::vector<double> step_s;
  for (int i = 0; i < warmup + steps; ++i) {
    progress("train", i + 1, warmup + steps, i < warmup ? "warm-up step" : "timed step");
    double t0 = now_s();
    eng.train_step(data.in, data.tg);
    sync();
    if (i >= warmup) step_s.push_back(now_s() - t0);
  }
  const double tok_s = static_cast<double>(B * T) / median(step_s);
  const double flops_token = 6.0 * n_params + 6.0 * cfg.n_layer * cfg.d_model * T;
  const double mfu = flops_token * tok_s / (peak_tflops * 1e12);
  std::printf("train %s (%.0fM params), batch %lld x %lld: %.0f tokens/s, %.1f TFLOP/s, MFU %.3f of %.0f TFLOP/s\n",
              cfg.str().c_str(), n_params / 1e6, static_cast<long long>(B), static_cast<long long>(T), tok_s,
              flops_token * tok_s * 1e-12, mfu, peak_tflops);
  report.add("train", "gpt").num("params", static_cast<double>(n_params)).num("tokens_per_s", tok_s)
      .num("mfu", mfu).num("peak_tflops", peak_tflops).num("step_median_s", median(step_s));
  const int64_t param_bytes = ledger_for(kGpu).current(DT_MEM_PARAM);
  const int64_t opt_bytes = ledger_for(kGpu).current(DT_MEM_OPTIMIZER);
  report.add("memory", "gpu").num("param_bytes", static_cast<double>(param_bytes)).num("optimizer_bytes", static_cast<double>(opt_bytes))
      .num("peak_all_bytes", static_cast<double>(ledger_for(kGpu).peak(DT_MEM_ALL)));

  const int64_t prompt = 64, fresh = quick ? 16 : 64;
  for (int64_t gb : {int64_t{1}, int64_t{64}}) {
    std::vector<std::vector<int32_t>> prompts(gb, std::vector<int32_t>(prompt));
    for (int64_t r = 0; r < gb; ++r)
      for (int64_t t = 0; t < prompt; ++t) prompts[r][t] = static_cast<int32_t>((r * 31 + t * 7) % cfg.vocab_size);
    engine::GenerateOptions go;
    go.max_new_tokens = fresh;
    std::vector<double> tps;
    for (int i = 0; i < 3; ++i) {  // i == 0: warm-up
      progress("decode", i + 1, 3, "batch " + std::to_string(gb));
      engine::GenerateResult res = engine::generate(model, prompts, go);
      if (i > 0) tps.push_back(static_cast<double>(gb) / res.stats.inter_token_latency_s);  // rows per decode step
    }
    std::printf("decode batch %lld: %.0f tokens/s\n", static_cast<long long>(gb), median(tps));
    report.add("decode", "batch" + std::to_string(gb)).num("tokens_per_s", median(tps));
  }
}

}  // namespace
}  // namespace dt::bench

int main(int argc, char** argv) {
  using namespace dt::bench;
  const std::string usage =
      "usage: bench_gpu [--quick] [--json PATH] [--peak-tflops X] [--layers N] [--batch N]\n"
      "  default: GEMM 4096/8192 bf16+f32, attention B4 T2048, GPT 24 layers d1024 (~350M), batch 8\n";
  Options opt = parse_args(argc, argv, usage, {"peak-tflops", "layers", "batch"});
  Report report("bench_gpu");
  if (dt::gpu::device_count() < 1) {
    std::printf("bench_gpu: no usable GPU (%s); nothing to measure\n", dt::gpu::availability_note().c_str());
    report.note("all", "skipped", dt::gpu::availability_note());
    if (!opt.json_path.empty()) report.write(opt.json_path);
    return 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("bench_gpu on %s (sm_%d%d, %.0f GiB)\n\n", prop.name, prop.major, prop.minor, prop.totalGlobalMem / 1073741824.0);
  report.meta().str("gpu", prop.name).flag("quick", opt.quick);
  double peak = std::atof(option_value(opt, "peak-tflops", "989").c_str());
  int64_t layers = std::atoll(option_value(opt, "layers", opt.quick ? "2" : "24").c_str());
  int64_t batch = std::atoll(option_value(opt, "batch", opt.quick ? "4" : "8").c_str());
  bool failed = false;
  auto section = [&](const char* name, const std::function<void()>& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      std::printf("%s failed: %s\n", name, e.what());
      report.note(name, "failed", e.what());
      failed = true;
    }
  };
  section("gemm", [&] { gemm_section(opt.quick, report); });
  section("attention", [&] { attention_section(opt.quick, report); });
  section("model", [&] { model_section(opt.quick, peak, layers, batch, report); });
  if (!opt.json_path.empty() && !report.write(opt.json_path)) return 1;
  return failed ? 1 : 0;
}
