// The training engine: memorization, micro-batch equivalence, determinism, bitwise resume
// from a checkpoint, the grad-ready hook, metrics and input validation.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include "core/rng.h"
#include "engine/train_engine.h"
#include "io/sampler.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

using engine::TrainEngine;
using engine::TrainOptions;

nn::GPTConfig tiny(bool llama) {
  nn::GPTConfig c;
  c.vocab_size = 11;
  c.context = 8;
  c.n_layer = 2;
  c.d_model = 16;
  c.n_head = 2;
  c.d_ff = 32;
  if (llama) {
    c = c.llama_style();
    c.n_head = 4;
    c.n_kv_head = 2;
  }
  return c;
}


TEST(EngineTrain, MemorizesAFewSequences) {
  nn::GPT m(tiny(false));
  optim::AdamWOptions ao;
  ao.lr = 1e-2f;
  ao.weight_decay = 0.0f;
  optim::AdamW opt(m.parameters(), ao);
  TrainOptions o;
  o.micro_batches = 2;
  o.max_grad_norm = 1.0;
  o.schedule = optim::LrSchedule::warmup_cosine(1e-2f, 10, 300, 0.1f);
  TrainEngine eng(nullptr, m, opt, o);
  test::TokenBatch b = test::random_token_batch(4, 8, 11, 3);
  engine::StepStats first = eng.train_step(b.in, b.tg), s;
  for (int i = 1; i < 300; ++i) s = eng.train_step(b.in, b.tg);
  std::printf("loss %.4f -> %.4f; last step: %s\n", first.loss, s.loss, engine::metrics_json(s).c_str());
  EXPECT_NEAR(first.loss, std::log(11.0), 0.15);
  EXPECT_LT(s.loss, 0.05);
  EXPECT_LT(eng.evaluate(b.in, b.tg), 0.05);
  EXPECT_EQ(s.step, 300);
  EXPECT_EQ(s.tokens, 32);
  EXPECT_FLOAT_EQ(s.lr, o.schedule.lr(299));
  nlohmann::json j = nlohmann::json::parse(engine::metrics_json(s));
  for (const char* k : {"step", "loss", "grad_norm", "lr", "tokens", "seconds", "tokens_per_s"})
    EXPECT_TRUE(j.contains(k)) << k;
}

// One SGD step with 1, 2 and 4 micro-batches. Targets are partly ignored, unevenly across
// the micro-batches, which checks the count-weighted accumulation. The sums run in different
// groupings (one matmul over 4 rows vs 4 accumulated ones), so this holds to f32 rounding,
// not bitwise: measured max |dp| ~1e-8 after a step of lr 0.5; asserted <= 1e-7.
TEST(EngineTrain, MicroBatchesGiveTheFullBatchGradient) {
  test::TokenBatch b = test::random_token_batch(4, 8, 11, 5);
  for (int i = 0; i < 32; i += 3)
    if (i < 8 || i % 2) b.tg.data<int32_t>()[i] = -1;  // row 0 mostly ignored
  for (bool llama : {false, true}) {
    std::vector<std::vector<double>> params;
    std::vector<double> losses;
    for (int64_t M : {1, 2, 4}) {
      nn::GPT m(tiny(llama));
      optim::SgdOptions so;
      so.lr = 0.5f;
      optim::Sgd opt(m.parameters(), so);
      TrainOptions o;
      o.micro_batches = M;
      o.max_grad_norm = 0.5;  // clipping active: the norms must agree too
      o.schedule = optim::LrSchedule::constant(0.5f);
      TrainEngine eng(nullptr, m, opt, o);
      losses.push_back(eng.train_step(b.in, b.tg).loss);
      std::vector<double> all;
      for (nn::Parameter* p : m.parameters())
        for (double v : test::to_f64(p->value)) all.push_back(v);
      params.push_back(all);
    }
    for (int k = 1; k < 3; ++k) {
      double worst = 0;
      for (size_t i = 0; i < params[0].size(); ++i) worst = std::max(worst, std::abs(params[k][i] - params[0][i]));
      std::printf("%s, %d micro-batches vs 1: loss diff %.3g, max |dparam| %.3g\n", llama ? "rope+gqa" : "learned",
                  1 << k, losses[k] - losses[0], worst);
      EXPECT_NEAR(losses[k], losses[0], 1e-6);
      test::expect_close(params[k], params[0], 1e-7, 0.0, "params, micro-batches vs 1");
    }
  }
}

// Runs `steps` AdamW steps with warmup, cosine and clipping over a sampler's batches.
struct Trainer {
  nn::GPT m;
  optim::AdamW opt;
  TrainEngine eng;
  io::Sampler sampler;
  std::vector<double> losses;
  explicit Trainer(bool llama)
      : m(tiny(llama)),
        opt(m.parameters(), optim::AdamWOptions{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f}),
        eng(nullptr, m, opt, options()),
        sampler(data(), io::SamplerOptions{4, 7, true, 0, 1}) {}
  static TrainOptions options() {
    TrainOptions o;
    o.micro_batches = 2;
    o.max_grad_norm = 1.0;
    o.schedule = optim::LrSchedule::warmup_cosine(3e-3f, 5, 20, 0.1f);
    return o;
  }
  static std::shared_ptr<io::Dataset> data() {
    std::vector<int32_t> toks;
    CounterRng rng(9, "stream");
    for (int i = 0; i < 8 * 12 + 1; ++i) toks.push_back(static_cast<int32_t>(rng.bits(i) % 11));
    return io::TokenDataset::from_tokens(toks, 8);  // 12 examples: 3 batches per epoch
  }
  void train(int steps) {
    Tensor in, tg;
    for (int i = 0; i < steps; ++i) {
      sampler.next(in, tg);
      losses.push_back(eng.train_step(in, tg).loss);
    }
  }
};

void expect_same_params(nn::GPT& a, nn::GPT& b) {
  nn::ParamList pa = a.parameters(), pb = b.parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(test::same_bits(pa[i]->value, pb[i]->value)) << pa[i]->name;
}

TEST(EngineTrain, SameSeedIsBitwiseIdentical) {
  Trainer a(true), b(true);
  a.train(8);
  b.train(8);
  EXPECT_EQ(a.losses, b.losses);
  expect_same_params(a.m, b.m);
}

TEST(EngineTrain, ResumeFromCheckpointIsBitwiseEqualToTrainingStraight) {
  const std::string dir = ::testing::TempDir() + "dtrain_engine_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  for (bool llama : {false, true}) {
    Trainer straight(llama);
    straight.train(20);
    {
      Trainer first(llama);
      first.train(10);
      first.eng.save(dir, {{"epoch", first.sampler.epoch()}, {"position", first.sampler.position()}});
    }
    Trainer resumed(llama);  // fresh model, optimizer and sampler: everything comes from the files
    nlohmann::json extra = resumed.eng.load(dir);
    EXPECT_EQ(resumed.eng.step(), 10);
    resumed.sampler.seek(extra.at("epoch").get<int64_t>(), extra.at("position").get<int64_t>());
    resumed.train(10);
    std::vector<double> tail(straight.losses.begin() + 10, straight.losses.end());
    EXPECT_EQ(resumed.losses, tail);
    expect_same_params(straight.m, resumed.m);
    EXPECT_EQ(resumed.eng.step(), 20);
    std::filesystem::remove_all(dir);
  }
}

TEST(EngineTrain, GradReadyHookSeesEveryParameterOnceAfterItsGradientIsFinal) {
  nn::GPT m(tiny(true));
  optim::Sgd opt(m.parameters(), optim::SgdOptions{});
  TrainOptions o;
  o.micro_batches = 2;
  TrainEngine eng(nullptr, m, opt, o);
  std::vector<std::string> seen;
  eng.set_grad_ready_hook([&](const nn::ParamList& ps) {
    for (nn::Parameter* p : ps) seen.push_back(p->name);
  });
  test::TokenBatch b = test::random_token_batch(4, 8, 11, 1);
  eng.train_step(b.in, b.tg);
  std::set<std::string> unique(seen.begin(), seen.end());
  EXPECT_EQ(seen.size(), m.parameters().size());
  EXPECT_EQ(unique.size(), seen.size());
  EXPECT_EQ(seen.front().rfind("blocks.1.", 0), 0u) << "the last block finishes first";
}

TEST(EngineTrain, EvaluateChangesNothing) {
  nn::GPT m(tiny(false));
  optim::AdamW opt(m.parameters(), optim::AdamWOptions{});
  TrainEngine eng(nullptr, m, opt, TrainOptions{});
  test::TokenBatch b = test::random_token_batch(2, 8, 11, 2);
  std::vector<double> before = test::to_f64(m.parameters()[0]->value);
  double l1 = eng.evaluate(b.in, b.tg), l2 = eng.evaluate(b.in, b.tg);
  EXPECT_EQ(l1, l2);
  EXPECT_EQ(test::to_f64(m.parameters()[0]->value), before);
  EXPECT_EQ(eng.step(), 0);
}

TEST(EngineTrain, RunsOnAOneRankMesh) {
  comm::BackendOptions bo;
  bo.world_size = 1;
  auto mesh = comm::Mesh::create("local", comm::Coords{1, 1, 1, 1, 1}, bo);
  Trainer ref(false);
  nn::GPT m(tiny(false));
  optim::AdamW opt(m.parameters(), optim::AdamWOptions{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f});
  TrainEngine eng(mesh, m, opt, Trainer::options());
  ref.train(3);
  Tensor in, tg;
  for (int i = 0; i < 3; ++i) {
    ref.sampler.batch(0, i, in, tg);
    EXPECT_EQ(eng.train_step(in, tg).loss, ref.losses[i]);
  }
  expect_same_params(ref.m, m);
}

TEST(EngineTrain, BadInputsNameTheField) {
  nn::GPT m(tiny(false));
  optim::Sgd opt(m.parameters(), optim::SgdOptions{});
  TrainOptions o;
  o.micro_batches = 4;
  TrainEngine eng(nullptr, m, opt, o);
  test::TokenBatch b = test::random_token_batch(6, 8, 11, 1);
  test::expect_invalid([&] { eng.train_step(b.in, b.tg); }, "batch B = 6 is not divisible by micro_batches = 4");
  test::TokenBatch c = test::random_token_batch(4, 8, 11, 1);
  c.in.data<int32_t>()[5] = 11;
  test::expect_invalid([&] { eng.train_step(c.in, c.tg); }, "inputs holds token id 11");
  c.in.data<int32_t>()[5] = 0;
  c.tg.data<int32_t>()[3] = 12;
  test::expect_invalid([&] { eng.evaluate(c.in, c.tg); }, "targets holds 12");
  test::expect_invalid([&] { eng.train_step(Tensor(), Tensor()); }, "inputs");
  test::expect_invalid([&] { eng.train_step(c.in, c.tg.reshape({8, 4})); }, "targets");
  o.micro_batches = 0;
  test::expect_invalid([&] { TrainEngine bad(nullptr, m, opt, o); }, "micro_batches");
  EXPECT_EQ(eng.step(), 0);
}

}  // namespace
}  // namespace dt
