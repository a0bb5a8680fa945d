// Mixed precision in the modules and the training engine: bf16 and f16 GPTs track the f32
// run, the ledger shows 2 + 2 + 12 bytes per parameter for bf16 AdamW, the f16 loss scaler
// skips overflowing steps without touching anything and grows after good ones, bf16 runs
// are bitwise reproducible and resume bitwise from a checkpoint, and greedy generation over
// a bf16 KV cache equals recomputing the full forward.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "core/allocator.h"
#include "engine/generate.h"
#include "engine/train_engine.h"
#include "nn/kv_cache.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

using engine::StepStats;
using engine::TrainEngine;
using engine::TrainOptions;

nn::GPTConfig config(bool llama, DType dtype) {
  nn::GPTConfig c;
  c.vocab_size = 32;
  c.context = 16;
  c.n_layer = 2;
  c.d_model = 32;
  c.n_head = 4;
  c.d_ff = 64;
  c.seed = 11;
  if (llama) {  // RMSNorm, RoPE, SwiGLU, untied head, grouped-query attention
    c = c.llama_style();
    c.n_kv_head = 2;
  }
  c.dtype = dtype;
  return c;
}

const char* name_of(bool llama) { return llama ? "llama" : "gpt"; }

// Batch k of a stream that cycles through 3 random batches (B sequences of T + 1 tokens;
// targets are the inputs shifted), so a few steps memorize them and the loss moves a lot.
test::TokenBatch batch(int64_t k, int64_t B = 4, int64_t T = 16, int64_t V = 32) {
  return test::random_token_batch(B, T, V, static_cast<uint64_t>(100 + k % 3));
}

// A model, its AdamW and an engine; f16 uses `scaler`.
struct Trainer {
  nn::GPT m;
  optim::AdamW opt;
  TrainEngine eng;
  std::vector<StepStats> stats;
  static optim::AdamWOptions adamw() {
    optim::AdamWOptions a;
    a.lr = 3e-3f;
    return a;
  }
  static TrainOptions options(const optim::LossScalerOptions& scaler) {
    TrainOptions o;
    o.micro_batches = 2;
    o.max_grad_norm = 1.0;
    o.schedule = optim::LrSchedule::constant(3e-3f);
    o.loss_scaler = scaler;
    return o;
  }
  Trainer(bool llama, DType dtype, const optim::LossScalerOptions& scaler = {})
      : m(config(llama, dtype)), opt(m.parameters(), adamw()), eng(nullptr, m, opt, options(scaler)) {}
  // Steps over batches [from, from + n).
  void train(int64_t n, int64_t from = 0) {
    for (int64_t k = from; k < from + n; ++k) {
      test::TokenBatch b = batch(k);
      stats.push_back(eng.train_step(b.in, b.tg));
    }
  }
};

// Every checkpoint entry (parameters, optimizer state, scaler state), deep-copied.
std::vector<Tensor> snapshot(TrainEngine& e) {
  std::vector<Tensor> out;
  for (auto& ct : e.state_tensors()) out.push_back(test::converted(ct.tensor, ct.tensor.dtype()));
  return out;
}

void expect_same_state(TrainEngine& a, TrainEngine& b) {
  auto sa = a.state_tensors(), sb = b.state_tensors();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) EXPECT_TRUE(test::same_bits(sa[i].tensor, sb[i].tensor)) << sa[i].name;
}

// ||a - b|| / ||b|| over every parameter together, values widened to double.
double relative_param_distance(nn::GPT& a, nn::GPT& b) {
  double diff = 0, ref = 0;
  nn::ParamList pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    std::vector<double> x = test::to_f64(pa[i]->value), y = test::to_f64(pb[i]->value);
    for (size_t j = 0; j < x.size(); ++j) diff += (x[j] - y[j]) * (x[j] - y[j]), ref += y[j] * y[j];
  }
  return std::sqrt(diff / ref);
}

TEST(EnginePrecision, ConfigValidatesAndNamesTheDtype) {
  nn::GPTConfig c = config(false, DType::I32);
  test::expect_invalid([&] { nn::validate(c); }, "GPTConfig.dtype = i32; accepted: f32, bf16, f16");
  EXPECT_EQ(config(false, DType::F32).str().find("dtype"), std::string::npos);  // f32 string unchanged
  EXPECT_NE(config(false, DType::BF16).str().find(", dtype=bf16)"), std::string::npos);
}

// Init is drawn in f32 and rounded once: a bf16 or f16 model is the f32 model rounded.
TEST(EnginePrecision, LowPrecisionModelIsTheF32ModelRounded) {
  for (bool llama : {false, true})
    for (DType dt : {DType::BF16, DType::F16}) {
      nn::GPT f32(config(llama, DType::F32)), low(config(llama, dt));
      nn::ParamList a = f32.parameters(), b = low.parameters();
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(b[i]->grad.dtype(), dt) << b[i]->name;
        EXPECT_TRUE(test::same_bits(b[i]->value, test::converted(a[i]->value, dt))) << b[i]->name;
      }
    }
}

// 12 AdamW steps (lr 3e-3, clipping at 1, 2 micro-batches) on the same batches; the loss
// falls from ~3.48 to ~3.13. Tolerances, with what was measured (gpt / llama):
//  - per step, |loss - f32 loss| <= 5e-3 of the f32 loss for bf16 (measured 2.7e-4 / 1.7e-4)
//    and 1e-3 for f16 (1.1e-4 / 1.5e-5): bf16 keeps 8 significant bits, f16 11;
//  - the reported (unscaled) grad norm within 3% of f32's (measured under 1%);
//  - final parameters: ||p - p_f32|| / ||p_f32|| <= 3e-2 for bf16 (8.2e-3 / 4.7e-3) and
//    1.5e-2 for f16 (4.0e-3 / 9.4e-4). Adam amplifies rounding in near-zero gradients (its
//    step is ~lr whatever their size), so parameters drift more than losses.
// f16 starts at a scale of 1024 (these grads never overflow there), so no step is skipped
// and the step counts stay aligned with f32.
TEST(EnginePrecision, Bf16AndF16TrackF32Training) {
  optim::LossScalerOptions scaler;
  scaler.init_scale = 1024.0f;
  for (bool llama : {false, true}) {
    Trainer ref(llama, DType::F32);
    ref.train(12);
    for (DType dt : {DType::BF16, DType::F16}) {
      const bool bf = dt == DType::BF16;
      Trainer low(llama, dt, scaler);
      low.train(12);
      double worst = 0;
      for (size_t k = 0; k < ref.stats.size(); ++k) {
        worst = std::max(worst, std::abs(low.stats[k].loss - ref.stats[k].loss) / ref.stats[k].loss);
        EXPECT_FALSE(low.stats[k].skipped) << k;
        EXPECT_EQ(low.stats[k].loss_scale, bf ? 1.0 : 1024.0);
        EXPECT_NEAR(low.stats[k].grad_norm, ref.stats[k].grad_norm, 0.03 * ref.stats[k].grad_norm) << k;
      }
      const double dist = relative_param_distance(low.m, ref.m);
      std::printf("%s %s: loss %.4f -> %.4f (f32 %.4f -> %.4f), worst relative loss diff %.2e, param distance %.2e\n",
                  name_of(llama), dtype_name(dt), low.stats.front().loss, low.stats.back().loss,
                  ref.stats.front().loss, ref.stats.back().loss, worst, dist);
      EXPECT_LE(worst, bf ? 5e-3 : 1e-3) << name_of(llama) << " " << dtype_name(dt);
      EXPECT_LE(dist, bf ? 3e-2 : 1.5e-2) << name_of(llama) << " " << dtype_name(dt);
      EXPECT_LT(low.stats.back().loss, low.stats.front().loss);  // and it learns
      EXPECT_EQ(low.eng.step(), 12);
    }
  }
}

// Params and grads are bf16 (2 bytes each); AdamW keeps an f32 master, exp_avg and
// exp_avg_sq: K = 12 bytes/param, plus the 8-byte step counter.
TEST(EnginePrecision, LedgerShowsBf16BytesPerParameter) {
  Ledger& l = ledger_for(Device::cpu());
  const int64_t p0 = l.current(DT_MEM_PARAM), g0 = l.current(DT_MEM_GRAD), o0 = l.current(DT_MEM_OPTIMIZER);
  nn::GPT m(config(true, DType::BF16));
  const int64_t n = m.num_parameters();
  optim::AdamW opt(m.parameters(), optim::AdamWOptions{});
  EXPECT_EQ(l.current(DT_MEM_PARAM) - p0, 2 * n);
  EXPECT_EQ(l.current(DT_MEM_GRAD) - g0, 2 * n);
  EXPECT_EQ(l.current(DT_MEM_OPTIMIZER) - o0, 12 * n + 8);
  // The KV cache holds the model's dtype too.
  const int64_t kv0 = l.current(DT_MEM_KV_CACHE);
  nn::KvCache c = nn::KvCache::create(m.config(), 1, 4);
  EXPECT_EQ(l.current(DT_MEM_KV_CACHE) - kv0, 2 /*k, v*/ * 2 /*layers*/ * 4 * 2 /*kv heads*/ * 8 * 2 /*bytes*/);
}

// Writes +Inf into the first element of the first parameter's grad once its gradient is
// final (the grad-ready hook of the last micro-batch): an f16 overflow, planted.
void plant_inf(TrainEngine& e) {
  e.set_grad_ready_hook([](const nn::ParamList& ready) {
    ready.front()->grad.data<f16>()[0] = from_f32<f16>(std::numeric_limits<float>::infinity());
  });
}

TEST(EnginePrecision, F16OverflowSkipsTheStepAndLeavesEverythingUnchanged) {
  optim::LossScalerOptions so;
  so.init_scale = 1024.0f;
  so.growth_interval = 100;
  Trainer r(false, DType::F16, so);
  r.train(2);  // non-zero moments, so "unchanged" means something
  const std::vector<Tensor> before = snapshot(r.eng);
  plant_inf(r.eng);
  test::TokenBatch b = batch(2);
  StepStats s = r.eng.train_step(b.in, b.tg);
  EXPECT_TRUE(s.skipped);
  EXPECT_FALSE(std::isfinite(s.grad_norm));
  EXPECT_EQ(s.loss_scale, 1024.0);
  EXPECT_EQ(s.step, 2);
  EXPECT_EQ(r.eng.step(), 2);
  EXPECT_EQ(r.eng.loss_scaler()->scale(), 512.0f);
  EXPECT_EQ(r.eng.loss_scaler()->good_steps(), 0);
  auto after = r.eng.state_tensors();
  for (size_t i = 0; i < after.size(); ++i)
    if (after[i].name.rfind("loss_scaler.", 0) != 0)
      EXPECT_TRUE(test::same_bits(after[i].tensor, before[i])) << after[i].name;
  for (nn::Parameter* p : r.m.parameters())
    for (double g : test::to_f64(p->grad)) ASSERT_EQ(g, 0.0) << p->name << ": grads are zeroed after a skip";
  nlohmann::json j = nlohmann::json::parse(engine::metrics_json(s));
  EXPECT_EQ(j["skipped"], true);
  EXPECT_EQ(j["loss_scale"], 1024.0);
  r.eng.set_grad_ready_hook({});
  s = r.eng.train_step(b.in, b.tg);  // the same batch at the halved scale goes through
  EXPECT_FALSE(s.skipped);
  EXPECT_EQ(s.loss_scale, 512.0);
  EXPECT_EQ(s.step, 3);
  EXPECT_TRUE(std::isfinite(s.grad_norm));
}

// At min_scale an overflow throws (the run is diverging) and the step leaves nothing
// half-done: parameters, optimizer state and the scaler's state are as before.
TEST(EnginePrecision, F16OverflowAtMinScaleThrowsAndChangesNothing) {
  optim::LossScalerOptions so;
  so.init_scale = 1.0f;
  so.min_scale = 1.0f;
  so.growth_interval = 100;
  Trainer r(false, DType::F16, so);
  r.train(1);
  const std::vector<Tensor> before = snapshot(r.eng);
  plant_inf(r.eng);
  test::TokenBatch b = batch(1);
  test::expect_invalid([&] { r.eng.train_step(b.in, b.tg); }, "diverging");
  EXPECT_EQ(r.eng.step(), 1);
  EXPECT_EQ(r.eng.loss_scaler()->scale(), 1.0f);
  EXPECT_EQ(r.eng.loss_scaler()->good_steps(), 1);
  auto after = r.eng.state_tensors();
  for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(test::same_bits(after[i].tensor, before[i])) << after[i].name;
}

TEST(EnginePrecision, F16ScaleGrowsAfterGrowthIntervalGoodSteps) {
  optim::LossScalerOptions so;
  so.init_scale = 256.0f;
  so.growth_interval = 3;
  Trainer r(true, DType::F16, so);
  r.train(7);
  const double want[7] = {256, 256, 256, 512, 512, 512, 1024};  // the scale each step ran with
  for (int k = 0; k < 7; ++k) {
    EXPECT_FALSE(r.stats[k].skipped) << k;
    EXPECT_EQ(r.stats[k].loss_scale, want[k]) << k;
  }
  EXPECT_EQ(r.eng.loss_scaler()->scale(), 1024.0f);
  EXPECT_EQ(r.eng.loss_scaler()->good_steps(), 1);
  // The checkpoint entries follow the scaler.
  for (auto& ct : r.eng.state_tensors()) {
    if (ct.name == "loss_scaler.scale") EXPECT_EQ(ct.tensor.data<float>()[0], 1024.0f);
    if (ct.name == "loss_scaler.good_steps") EXPECT_EQ(ct.tensor.data<int64_t>()[0], 1);
  }
  Trainer bf(true, DType::BF16);  // only f16 models carry scaler state
  for (auto& ct : bf.eng.state_tensors()) EXPECT_EQ(ct.name.rfind("loss_scaler.", 0), std::string::npos) << ct.name;
  EXPECT_EQ(bf.eng.loss_scaler(), nullptr);
}

// The default scaler (2^16) end to end. This small model's grads fit at 2^16 (no step was
// skipped when measured), but the checks hold either way: each skip halves the scale and
// takes no step.
TEST(EnginePrecision, F16WithTheDefaultScaleTrains) {
  Trainer r(false, DType::F16);
  r.train(12);
  int skipped = 0;
  for (const StepStats& s : r.stats) skipped += s.skipped;
  std::printf("default scaler: %d of 12 steps skipped, final scale %g, loss %.4f -> %.4f\n", skipped,
              r.eng.loss_scaler()->scale(), r.stats.front().loss, r.stats.back().loss);
  EXPECT_EQ(r.eng.step(), 12 - skipped);
  EXPECT_EQ(r.eng.loss_scaler()->scale(), 65536.0f / static_cast<float>(1 << skipped));
  EXPECT_LT(skipped, 12);
  EXPECT_LT(r.stats.back().loss, r.stats.front().loss);
}

TEST(EnginePrecision, SameSeedBf16RunsAreBitwiseIdentical) {
  Trainer a(true, DType::BF16), b(true, DType::BF16);
  a.train(6);
  b.train(6);
  for (size_t k = 0; k < a.stats.size(); ++k) EXPECT_EQ(a.stats[k].loss, b.stats[k].loss) << k;
  expect_same_state(a.eng, b.eng);
}

// Train 5, save, load into a fresh engine, train 5 more: bitwise the 10-step run. For f16
// the scaler's scale and good-step count come back too (growth_interval 4, so the save
// lands mid-interval and the scale grows on both sides of it).
TEST(EnginePrecision, CheckpointRoundTripResumesBitwise) {
  const std::string dir = ::testing::TempDir() + "dtrain_precision_" + std::to_string(::getpid());
  optim::LossScalerOptions so;
  so.init_scale = 256.0f;
  so.growth_interval = 4;
  for (DType dt : {DType::BF16, DType::F16}) {
    std::filesystem::remove_all(dir);
    Trainer straight(false, dt, so);
    straight.train(10);
    {
      Trainer first(false, dt, so);
      first.train(5);
      first.eng.save(dir);
    }
    Trainer resumed(false, dt, so);
    resumed.eng.load(dir);
    EXPECT_EQ(resumed.eng.step(), 5);
    if (dt == DType::F16) {
      EXPECT_EQ(resumed.eng.loss_scaler()->scale(), 512.0f);
      EXPECT_EQ(resumed.eng.loss_scaler()->good_steps(), 1);
    }
    resumed.train(5, 5);
    for (size_t k = 0; k < 5; ++k) EXPECT_EQ(resumed.stats[k].loss, straight.stats[k + 5].loss) << dtype_name(dt) << k;
    expect_same_state(straight.eng, resumed.eng);
    EXPECT_EQ(resumed.eng.step(), 10);
  }
  // A scaler state this engine's options refuse is an error before anything is written.
  so.growth_interval = 1;
  Trainer strict(false, DType::F16, so);
  const std::vector<Tensor> before = snapshot(strict.eng);
  test::expect_invalid([&] { strict.eng.load(dir); }, "good_steps");
  auto after = strict.eng.state_tensors();
  for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(test::same_bits(after[i].tensor, before[i])) << after[i].name;
  std::filesystem::remove_all(dir);
}

// Greedy decoding by re-running the full forward over the whole sequence for each token.
std::vector<int32_t> greedy_full(nn::GPT& m, std::vector<int32_t> seq, int64_t n) {
  std::vector<int32_t> out;
  nn::GPTActs a;
  const int64_t V = m.config().vocab_size;
  for (int64_t i = 0; i < n; ++i) {
    Tensor ids = test::from_ints(seq, {1, static_cast<int64_t>(seq.size())});
    std::vector<double> l = test::to_f64(m.forward(ids, a));
    auto row = l.begin() + (static_cast<int64_t>(seq.size()) - 1) * V;
    int32_t t = static_cast<int32_t>(std::max_element(row, row + V) - row);
    out.push_back(t);
    seq.push_back(t);
  }
  return out;
}

// The cache holds bf16 keys and values exactly as the full forward computes them; scaling
// the weights up makes the argmax decisive (margins far above bf16 rounding), so the
// comparison tests the cache, not luck.
TEST(EnginePrecision, Bf16GreedyWithTheCacheEqualsRerunningTheFullForward) {
  for (bool llama : {false, true}) {
    nn::GPTConfig c = config(llama, DType::BF16);
    c.context = 24;
    nn::GPT m(c);
    for (nn::Parameter* p : m.parameters())
      if (p->name.find("ln") == std::string::npos) kernels::scale(p->value, 25.0f);
    const std::vector<int32_t> prompt = {3, 1, 4, 1, 5};
    engine::GenerateOptions o;
    o.max_new_tokens = 12;
    engine::GenerateResult r = engine::generate(m, {prompt}, o);
    EXPECT_EQ(r.tokens[0], greedy_full(m, prompt, 12)) << name_of(llama);
  }
}

}  // namespace
}  // namespace dt
