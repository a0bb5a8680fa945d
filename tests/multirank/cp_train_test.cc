// Context parallelism (ring attention on the cp axis, parallel/cp_strategy.h) trained on
// the local backend's layouts against one rank on the same global batches (DESIGN §4): cp 2
// and 4; cp 2 x dp 2; cp 2 with ZeRO-1 and -2 over dp x cp; cp 2 x tp 2, with and without
// sequence parallelism; cp 2 x pp 2. Llama-style (RoPE, GQA, an ignored target) and GPT-2
// style (learned positions); generation after cp training. 10 AdamW steps with clipping and a warmup-cosine schedule; f32
// within 2e-5 relative (loss per step, gradient norms, final parameters). Also: a sequence
// that does not split into 2 cp chunks, and cp with experts, are refused by name.
#include <cstdio>

#include "engine/generate.h"
#include "multirank/coll_util.h"
#include "multirank/dp_test_util.h"

namespace dt {
namespace {

constexpr int kSteps = 10;
using test::kSanitized;

nn::GPTConfig llama() {
  nn::GPTConfig c = test::tp_tiny_gpt(/*llama=*/true, DType::F32);
  c.context = 32;
  return c;
}

test::TokenBatch batch(int s) {
  test::TokenBatch b = test::random_token_batch(4, 16, 32, 700 + s % 3);
  b.tg.data<int32_t>()[21] = -1;  // an ignored target (in a middle chunk of row 1)
  return b;
}

test::TrainRun train(std::shared_ptr<comm::Mesh> mesh, const nn::GPTConfig& c, int64_t micro,
                     const engine::ParallelOptions& par = {}) {
  return test::train_layout(std::move(mesh), c, test::dp_options(micro), par, kSteps, batch);
}

std::shared_ptr<comm::Mesh> mesh(int dp, int pp, int cp, int tp = 1) { return comm::test::axes_mesh({dp, pp, 1, cp, tp}); }

TEST(CpTrain, ContextParallelMatchesSingleRankTraining) {
  for (bool rope : {true, false}) {
    if (kSanitized && !rope) continue;
    const nn::GPTConfig c = rope ? llama() : test::dp_tiny_gpt(DType::F32);
    const std::string what = rope ? "llama" : "gpt2";
    const test::TrainRun ref = train(nullptr, c, 2);
    test::expect_run_close(train(mesh(1, 1, 2), c, 2), ref, 2e-5, 2e-5, what + ", cp 2");
    if (kSanitized) continue;
    test::expect_run_close(train(mesh(1, 1, 4), c, 2), ref, 2e-5, 2e-5, what + ", cp 4");
    test::expect_run_close(train(mesh(2, 1, 2), c, 1), ref, 2e-5, 2e-5, what + ", dp 2 x cp 2");
  }
}

TEST(CpTrain, ComposesWithZeroTensorAndPipelineParallelism) {
  const nn::GPTConfig c = llama();
  const test::TrainRun ref = train(nullptr, c, 2);
  for (int zero : {1, 2}) {
    if (kSanitized && zero == 1) continue;
    engine::ParallelOptions p;
    p.zero = zero;
    test::expect_run_close(train(mesh(1, 1, 2), c, 2, p), ref, 2e-5, 2e-5, "cp 2, zero " + std::to_string(zero));
  }
  if (kSanitized) return;
  test::expect_run_close(train(mesh(1, 1, 2, 2), c, 2), ref, 2e-5, 2e-5, "cp 2 x tp 2");
  engine::ParallelOptions sp;
  sp.sequence_parallel = true;
  test::expect_run_close(train(mesh(1, 1, 2, 2), c, 2, sp), ref, 2e-5, 2e-5, "cp 2 x tp 2 with SP");
  test::expect_run_close(train(mesh(1, 2, 2), c, 2), ref, 2e-5, 2e-5, "cp 2 x pp 2");
}

TEST(CpTrain, GeneratesWithTheTrainedWeights) {
  nn::GPT model(llama());
  optim::AdamW opt(model.parameters(), test::dp_adamw());
  engine::Trainer t(mesh(1, 1, 2), model, opt, test::dp_options(1));
  for (int s = 0; s < 2; ++s) t.train_step(batch(s).in, batch(s).tg);
  engine::GenerateOptions g;
  g.max_new_tokens = 4;
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}, {4, 5}};
  const engine::GenerateResult got = t.generate(prompts, g);
  t.gather_model();
  EXPECT_EQ(got.tokens, engine::generate(model, prompts, g).tokens);
}

TEST(CpTrain, RefusalsNameTheOption) {
  const nn::GPTConfig c = llama();
  {
    nn::GPT model(c);
    optim::AdamW opt(model.parameters(), test::dp_adamw());
    engine::Trainer t(mesh(1, 1, 4), model, opt, test::dp_options(1));
    const test::TokenBatch b = test::random_token_batch(2, 12, 32, 1);
    test::expect_invalid([&] { t.train_step(b.in, b.tg); }, "does not split into 2 x cp = 8 equal chunks");
  }
  nn::GPTConfig moe = c;
  moe.n_experts = 4;
  moe.d_ff = 48;
  nn::GPT model(moe);
  optim::AdamW opt(model.parameters(), test::dp_adamw());
  test::expect_invalid([&] { engine::Trainer t(mesh(1, 1, 2), model, opt, test::dp_options(1)); },
                       "context parallelism (cp = 2) with a mixture of experts");
}

}  // namespace
}  // namespace dt
