// Generation with tensor parallelism: a Trainer over tp {2, 4} (with and without sequence
// parallelism, GPT-2 and llama style; llama at tp 4 has fewer KV heads than ranks) trains a
// few steps, then generates greedily on its replicas, each holding its part of the model and
// of the KV cache; the tokens equal those the single-rank model (the same trained weights,
// gathered) generates over ragged prompts, and each rank's KV cache holds its heads only.
#include "core/allocator.h"
#include "core/rank_scope.h"
#include "engine/generate.h"
#include "multirank/coll_util.h"
#include "multirank/dp_test_util.h"

namespace dt {
namespace DT_TEST_NS {

const std::vector<std::vector<int32_t>> kPrompts = {{1, 2, 3, 4, 5}, {7}, {9, 8, 7, 6, 5, 4, 3, 2}};

void expect_single_rank_tokens(bool llama, int tp, bool sp) {
  const nn::GPTConfig c = test::tp_tiny_gpt(llama, DType::F32);
  nn::GPT model(c);
  optim::AdamW opt(model.parameters(), test::dp_adamw());
  engine::ParallelOptions par;
  par.sequence_parallel = sp;
  engine::Trainer t(comm::test::axes_mesh({1, 1, 1, 1, tp}), model, opt, test::dp_options(1), par);
  for (int s = 0; s < 3; ++s) {  // weights that are not the initial draw
    const test::TokenBatch b = test::random_token_batch(8, 16, c.vocab_size, 40 + s);
    t.train_step(b.in, b.tg);
  }
  engine::GenerateOptions o;
  o.max_new_tokens = 6;
  std::vector<std::pair<int64_t, int32_t>> streamed;
  o.on_token = [&](int64_t p, int32_t tok) { streamed.emplace_back(p, tok); };
  reset_peaks(Device::cpu());
  const engine::GenerateResult got = t.generate(kPrompts, o);
  const std::string what = std::string(llama ? "llama" : "gpt2") + " tp " + std::to_string(tp) + (sp ? " sp" : "");
  // Each rank cached its own KV heads: 1/tp of the single-rank cache, or one head of the
  // model's when there are fewer KV heads than ranks.
  const nn::GPTConfig rc = c.resolved();
  const int64_t heads = rc.n_kv_head % tp == 0 ? rc.n_kv_head / tp : 1;
  const int64_t max_len = 8 + o.max_new_tokens;  // the longest prompt and its new tokens
  const int64_t want = 2 * rc.n_layer * 3 * max_len * heads * rc.head_dim() * 4;
  for (int r = 0; r < tp; ++r) {
    const Ledger* l = rank_ledger(Device::cpu(), r);
    ASSERT_NE(l, nullptr) << what;
    EXPECT_EQ(l->peak(DT_MEM_KV_CACHE), want) << what << " rank " << r;
  }
  // The single-rank model with the same weights (gathered into `model`).
  t.gather_model();
  o.on_token = nullptr;
  const engine::GenerateResult ref = engine::generate(model, kPrompts, o);
  EXPECT_EQ(got.tokens, ref.tokens) << what;
  size_t n = 0;
  for (const auto& p : ref.tokens) n += p.size();
  EXPECT_EQ(streamed.size(), n) << what << ": on_token fires once per token, on one replica";
}

TEST(TpGenerate, GivesTheSingleRankTokens) {
  for (bool sp : {false, true}) {
    for (int tp : {2, 4}) expect_single_rank_tokens(false, tp, sp);
    for (int tp : {2, 4}) expect_single_rank_tokens(true, tp, sp);
  }
}

}  // namespace
}  // namespace dt
