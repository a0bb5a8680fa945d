// Generation over a pipeline (engine::generate_pipelined, through Trainer::generate on a
// mesh with pp > 1): each stage holds its blocks and the KV cache of its layers only, the
// prompts are in flight together (prefill one after another through the stages, decode in
// min(B, P) groups), and every rank returns the tokens that single-rank generation gives
// with the same weights: greedy and sampled, ragged prompts, with stop tokens, pp {2, 4},
// pp 2 x tp 2 and dp 2 x pp 2. Streaming (on_token) reports every token once, in order per
// prompt; and a stage's KV cache holds only its layers.
#include <map>

#include "engine/generate.h"
#include "multirank/coll_util.h"
#include "multirank/dp_test_util.h"
#include "nn/kv_cache.h"

namespace dt {
namespace DT_TEST_NS {

nn::GPTConfig config(bool llama) {
  nn::GPTConfig c = test::tp_tiny_gpt(llama, DType::F32);
  c.n_layer = 4;
  c.context = 24;
  return c;
}

const std::vector<std::vector<int32_t>> kPrompts = {{1, 2, 3}, {4, 5, 6, 7, 8}, {9}, {10, 11}, {12, 13, 14, 15}};

// Trains two steps (so the weights are not the initial ones), then generates; returns the
// tokens, and the single-rank model's tokens from the same (gathered) weights.
std::pair<engine::GenerateResult, engine::GenerateResult> generate(std::shared_ptr<comm::Mesh> mesh, bool llama,
                                                                   const engine::GenerateOptions& g,
                                                                   std::map<int64_t, std::vector<int32_t>>* streamed) {
  nn::GPT model(config(llama));
  optim::AdamW opt(model.parameters(), test::dp_adamw());
  engine::ParallelOptions par;
  engine::Trainer t(mesh, model, opt, test::dp_options(2), par);
  for (int s = 0; s < 2; ++s) {
    const test::TokenBatch b = test::random_token_batch(8, 16, 32, 40 + s);
    t.train_step(b.in, b.tg);
  }
  engine::GenerateOptions mine = g;
  if (streamed) mine.on_token = [&](int64_t p, int32_t tok) { (*streamed)[p].push_back(tok); };
  engine::GenerateResult got = t.generate(kPrompts, mine);
  t.gather_model();
  return {got, engine::generate(model, kPrompts, g)};
}

TEST(PpGenerate, StagesGiveTheSingleRankTokens) {
  engine::GenerateOptions greedy;
  greedy.max_new_tokens = 6;
  greedy.stop_tokens = {3};
  engine::GenerateOptions sampled;
  sampled.max_new_tokens = 5;
  sampled.temperature = 0.9f;
  sampled.top_k = 8;
  sampled.seed = 17;
  struct Case {
    int dp, pp, tp;
    bool llama;
  };
  for (const Case& k : {Case{1, 2, 1, false}, Case{1, 4, 1, true}, Case{1, 2, 2, false}, Case{2, 2, 1, true}})
    for (const engine::GenerateOptions* g : {&greedy, &sampled}) {
      std::map<int64_t, std::vector<int32_t>> streamed;
      const auto [got, want] = generate(comm::test::axes_mesh({k.dp, k.pp, 1, 1, k.tp}), k.llama, *g, &streamed);
      const std::string what = "dp " + std::to_string(k.dp) + " x pp " + std::to_string(k.pp) + " x tp " +
                               std::to_string(k.tp) + (g == &greedy ? " greedy" : " sampled");
      EXPECT_EQ(got.tokens, want.tokens) << what;
      for (size_t p = 0; p < kPrompts.size(); ++p) EXPECT_EQ(streamed[static_cast<int64_t>(p)], got.tokens[p]) << what;
      EXPECT_GT(got.stats.new_tokens, 0) << what;
    }
}

TEST(PpGenerate, OnePromptPassesThroughTheStages) {
  // M = 1: a single prompt goes stage to stage (prefill, then each decode step).
  nn::GPT model(config(false));
  optim::AdamW opt(model.parameters(), test::dp_adamw());
  engine::Trainer t(comm::test::axes_mesh({1, 4, 1, 1, 1}), model, opt, test::dp_options(1));
  engine::GenerateOptions g;
  g.max_new_tokens = 7;
  const std::vector<std::vector<int32_t>> one = {{5, 6, 7}};
  const engine::GenerateResult got = t.generate(one, g);
  t.gather_model();
  EXPECT_EQ(got.tokens, engine::generate(model, one, g).tokens);
  EXPECT_EQ(got.tokens[0].size(), 7u);
}

TEST(PpGenerate, AStageCachesItsLayersOnly) {
  const nn::GPTConfig c = config(false);
  nn::KvCache kv = nn::KvCache::create(c, 2, 8, 0, {{1, 3}});
  EXPECT_FALSE(kv.k[0].defined());
  EXPECT_TRUE(kv.k[1].defined() && kv.k[2].defined());
  EXPECT_FALSE(kv.v[3].defined());
  // A stage refuses a cache without its layers, by name.
  nn::GPT stage(c, {}, {{0, 2}});
  Tensor ids = Tensor::zeros({1, 2}, DType::I32), x;
  test::expect_invalid([&] { stage.cached_embed(ids, kv, {0}, x); }, "holds no layer 0");
}

}  // namespace
}  // namespace dt
