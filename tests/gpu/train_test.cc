// A GPT on the GPU trains as it does on the CPU: the same config and seed give the same
// losses step by step (f32: to rounding; bf16: the curve tracks), greedy generation agrees,
// and a checkpoint saved from the GPU loads on the CPU. Through the public C API, the way
// a user asks for it: the module option "device": "cuda:0". Skips without a usable GPU.
#include <cmath>
#include <string>
#include <vector>

#include "abi/abi_util.h"
#include "api/firewall.h"
#include "core/gpu_runtime.h"
#include "core/tensor_copy.h"
#include "nn/gpt.h"
#include "unit/test_util.h"

namespace {

#define REQUIRE_GPU()                                                                                      \
  do {                                                                                                     \
    if (dt::gpu::device_count() < 1) GTEST_SKIP() << "no usable GPU: " << dt::gpu::availability_note();   \
  } while (0)

constexpr int64_t kB = 4, kT = 32;

dt_tensor* ids(const std::vector<int32_t>& v) {
  const int64_t shape[2] = {kB, kT};
  dt_tensor* t = nullptr;
  EXPECT_EQ(dt_tensor_create(DT_I32, shape, 2, "cpu", nullptr, &t), DT_OK);
  EXPECT_EQ(dt_tensor_copy_from_host(t, v.data(), v.size() * 4), DT_OK);
  return t;
}

// Batch `step` of a fixed pseudo-random token stream (byte vocab).
struct Batch {
  dt_tensor *in, *tg;
  explicit Batch(int step) {
    std::vector<int32_t> a(kB * kT), b(kB * kT);
    uint32_t s = 12345u + 7919u * static_cast<uint32_t>(step);
    for (int64_t i = 0; i < kB * kT; ++i) {
      s = s * 1664525u + 1013904223u;
      a[i] = static_cast<int32_t>((s >> 8) % 40 + 32);
      b[i] = static_cast<int32_t>((a[i] * 7 + 3) % 40 + 32);  // a learnable map
    }
    in = ids(a);
    tg = ids(b);
  }
  ~Batch() {
    dt_tensor_destroy(in);
    dt_tensor_destroy(tg);
  }
};

struct Training {
  dt_module* m = nullptr;
  dt_optimizer* opt = nullptr;
  dt_engine* e = nullptr;
  Training(const char* preset, const char* precision, const char* device, bool offload = false, dt_mesh* mesh = nullptr,
      int zero = 0) {
    Opts c;
    c.s("preset", preset).s("precision", precision).s("device", device).i("seed", 5);
    EXPECT_EQ(dt_module_create_gpt(c.o, &m), DT_OK) << dt_last_error_message();
    Opts o;
    o.d("lr", 3e-3).b("offload", offload);
    EXPECT_EQ(dt_optimizer_create(m, "adamw", o.o, &opt), DT_OK) << dt_last_error_message();
    Opts eo;
    eo.d("max_grad_norm", 1.0);
    if (mesh) eo.i("zero", zero);
    EXPECT_EQ(dt_engine_create(mesh, m, opt, eo.o, &e), DT_OK) << dt_last_error_message();
  }
  ~Training() {
    dt_engine_destroy(e);
    dt_optimizer_destroy(opt);
    dt_module_destroy(m);
  }
  std::vector<double> train(int steps) {
    std::vector<double> losses;
    for (int i = 0; i < steps; ++i) {
      Batch b(i);
      double loss = 0;
      EXPECT_EQ(dt_engine_train_step(e, b.in, b.tg, &loss), DT_OK) << dt_last_error_message();
      losses.push_back(loss);
    }
    return losses;
  }
  std::vector<int32_t> greedy() {
    const int64_t len[1] = {static_cast<int64_t>(kPrompt.size())};
    Opts g;
    g.i("max_new_tokens", 8);
    std::vector<int32_t> out(8);
    int64_t n = 0;
    EXPECT_EQ(dt_engine_generate(e, kPrompt.data(), len, 1, g.o, out.data(), 8, &n), DT_OK) << dt_last_error_message();
    return out;
  }
  // This model's logits [T, V] (f32, on the host) for one sequence.
  std::vector<float> logits(const std::vector<int32_t>& seq) {
    dt::Tensor ids = dt::Tensor::zeros({1, static_cast<int64_t>(seq.size())}, dt::DType::I32);
    std::copy(seq.begin(), seq.end(), ids.data<int32_t>());
    dt::nn::GPTActs acts;
    dt::Tensor host = dt::to_device(m->gpt->forward(ids, acts), dt::Device::cpu());
    std::vector<double> v = dt::test::to_f64(host);
    return std::vector<float>(v.begin(), v.end());
  }
  static inline const std::vector<int32_t> kPrompt = {40, 41, 42, 43};
};

// The GPU's greedy tokens are greedy choices of the CPU model up to rounding: fed the GPU's
// sequence, the CPU gives each chosen token a logit within `margin` (relative to the
// logits' spread) of its best. Exact equality would fail on a near-tie the two backends
// round apart (cuBLAS and OpenBLAS sum in different orders), and a token chosen after a
// flipped tie is then a fair choice for the sequence both see from there on.
void expect_greedy_agrees(Training& cpu, const std::vector<int32_t>& gpu_tokens, double margin, const char* what) {
  std::vector<int32_t> seq = Training::kPrompt;
  seq.insert(seq.end(), gpu_tokens.begin(), gpu_tokens.end() - 1);
  std::vector<float> lg = cpu.logits(seq);
  const size_t V = lg.size() / seq.size();
  for (size_t k = 0; k < gpu_tokens.size(); ++k) {
    const float* row = lg.data() + (Training::kPrompt.size() - 1 + k) * V;
    float best = row[0], worst = row[0];
    for (size_t v = 1; v < V; ++v) best = std::max(best, row[v]), worst = std::min(worst, row[v]);
    const double gap = best - row[gpu_tokens[k]];
    EXPECT_LE(gap, margin * std::max(1.0f, best - worst))
        << what << ": new token " << k << " (" << gpu_tokens[k] << ") is not a greedy choice of the CPU model";
  }
}

void expect_tracks(const std::vector<double>& gpu, const std::vector<double>& cpu, double rel, const char* what) {
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < gpu.size(); ++i)
    EXPECT_NEAR(gpu[i], cpu[i], rel * std::fabs(cpu[i])) << what << ": step " << i + 1;
}

TEST(GpuTrain, F32StepsMatchTheCpuStepForStep) {
  REQUIRE_GPU();
  for (const char* preset : {"gpt-tiny", "llama-tiny"}) {
    Training cpu(preset, "f32", "cpu"), gpu(preset, "f32", "cuda:0");
    expect_tracks(gpu.train(8), cpu.train(8), 1e-4, preset);
    // f32 logits of the two backends differ by ~1e-6 of their spread; 1e-4 leaves room and
    // still catches a wrong token (whose gap is a sizable part of the spread).
    expect_greedy_agrees(cpu, gpu.greedy(), 1e-4, preset);
  }
}

TEST(GpuTrain, Bf16LossCurveTracksTheCpuCurve) {
  REQUIRE_GPU();
  Training cpu("gpt-tiny", "bf16", "cpu"), gpu("gpt-tiny", "bf16", "cuda:0");
  std::vector<double> g = gpu.train(30), c = cpu.train(30);
  expect_tracks(g, c, 0.03, "bf16");
  EXPECT_LT(g.back(), 0.7 * g.front()) << "the GPU run learns";
}

TEST(GpuTrain, MemoryIsOnTheGpuAndCheckpointsLoadOnTheCpu) {
  REQUIRE_GPU();
  int64_t before = 0, cpu_params = 0;
  OK(dt_memory_stats("cpu", DT_MEM_PARAM, &before, nullptr));
  Training gpu("gpt-tiny", "f32", "cuda:0");
  int64_t on_gpu = 0;
  OK(dt_memory_stats("cuda:0", DT_MEM_PARAM, &on_gpu, nullptr));
  OK(dt_memory_stats("cpu", DT_MEM_PARAM, &cpu_params, nullptr));
  EXPECT_GT(on_gpu, 0);
  EXPECT_EQ(cpu_params, before) << "no parameter bytes on the host";
  gpu.train(3);
  std::string stem = ::testing::TempDir() + "gpu_ckpt";
  OK(dt_engine_save(gpu.e, stem.c_str()));
  Training cpu("gpt-tiny", "f32", "cpu");
  OK(dt_engine_load(cpu.e, stem.c_str()));
  Batch b(99);
  double lg = 0, lc = 0;
  OK(dt_engine_eval(gpu.e, b.in, b.tg, &lg));
  OK(dt_engine_eval(cpu.e, b.in, b.tg, &lc));
  EXPECT_NEAR(lg, lc, 1e-4 * lc);
  // And the next steps agree: the optimizer state came over too.
  expect_tracks(gpu.train(3), cpu.train(3), 1e-4, "after load");
}

// ZeRO-Offload: masters and moments on the host, updated by the CPU kernels; the GPU holds
// no optimizer bytes, and the run tracks the all-GPU one. The two apply AdamW with
// different code (CPU and CUDA kernels, the same formulas in kernels/update_rules.h but
// different contraction and rounding), so the curves drift apart by rounding: f32 within
// 1e-4 over 10 steps, the tolerance that GPU against CPU already holds over 8 (a larger
// difference than the optimizer's alone); bf16 within 1e-2 (one bf16 ulp is 4e-3).
TEST(GpuTrain, OffloadedOptimizerKeepsItsStateOnTheHost) {
  REQUIRE_GPU();
  for (const char* precision : {"f32", "bf16"}) {
    int64_t gpu_opt_before = 0;
    OK(dt_memory_stats("cuda:0", DT_MEM_OPTIMIZER, &gpu_opt_before, nullptr));
    std::vector<double> plain;
    int64_t plain_opt = 0;
    {
      Training all_gpu("gpt-tiny", precision, "cuda:0");
      plain = all_gpu.train(10);
      OK(dt_memory_stats("cuda:0", DT_MEM_OPTIMIZER, &plain_opt, nullptr));
    }
    Training off("gpt-tiny", precision, "cuda:0", /*offload=*/true);
    int64_t gpu_opt = 0, host_opt = 0;
    OK(dt_memory_stats("cuda:0", DT_MEM_OPTIMIZER, &gpu_opt, nullptr));
    OK(dt_memory_stats("cpu", DT_MEM_OPTIMIZER, &host_opt, nullptr));
    EXPECT_GT(plain_opt, gpu_opt_before) << precision;
    EXPECT_EQ(gpu_opt, gpu_opt_before) << precision << ": no optimizer bytes on the GPU";
    EXPECT_GT(host_opt, 0) << precision;
    expect_tracks(off.train(10), plain, std::string(precision) == "f32" ? 1e-4 : 1e-2, precision);
  }
}

// DDP and ZeRO-1/2/3 with NCCL, one GPU per rank, against one GPU training the same global
// batch. Needs two GPUs; with one, a two-rank GPU engine is refused and says why.
TEST(GpuTrain, DataParallelOverTwoGpusMatchesOneGpu) {
  REQUIRE_GPU();
  dt_mesh* mesh = nullptr;
  OK(dt_mesh_create("local", 2, nullptr, &mesh));
  if (dt::gpu::device_count() < 2) {
    dt_module* m = nullptr;
    Opts c;
    c.s("preset", "gpt-tiny").s("device", "cuda:0");
    OK(dt_module_create_gpt(c.o, &m));
    dt_optimizer* opt = nullptr;
    OK(dt_optimizer_create(m, "adamw", nullptr, &opt));
    dt_engine* e = nullptr;
    expect_error(dt_engine_create(mesh, m, opt, nullptr, &e), DT_ERR_UNSUPPORTED, {"one GPU per rank", "cuda:1"});
    dt_optimizer_destroy(opt);
    dt_module_destroy(m);
    dt_mesh_destroy(mesh);
    GTEST_SKIP() << "one GPU: the two-rank runs need two";
  }
  std::vector<double> one = Training("gpt-tiny", "f32", "cuda:0").train(6);
  for (int zero : {0, 1, 2, 3}) {
    Training dp("gpt-tiny", "f32", "cuda:0", false, mesh, zero);
    expect_tracks(dp.train(6), one, 1e-4, zero == 0 ? "ddp" : "zero");
  }
  dt_mesh_destroy(mesh);
}

}  // namespace
