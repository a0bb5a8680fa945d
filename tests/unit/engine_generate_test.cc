// Generation with a KV cache: the cached forward against the full forward, ragged batches,
// sampling (greedy, top-k, top-p, seeded), stop tokens and input validation.
#include <cmath>
#include <cstdio>

#include "core/allocator.h"
#include "engine/generate.h"
#include "nn/kv_cache.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

using engine::generate;
using engine::GenerateOptions;

nn::GPTConfig config(bool llama) {
  nn::GPTConfig c;
  c.vocab_size = 13;
  c.context = 24;
  c.n_layer = 2;
  c.d_model = 32;
  c.n_head = 4;
  c.d_ff = 64;
  c.seed = 7;
  if (llama) {  // RoPE + grouped-query attention
    c = c.llama_style();
    c.n_kv_head = 2;
  }
  return c;
}

// Random init gives near-uniform logits; scaling the weights up makes the argmax decisive
// (margins far above f32 rounding), so token comparisons test the cache, not luck.
void sharpen(nn::GPT& m) {
  for (nn::Parameter* p : m.parameters())
    if (p->name.find("ln") == std::string::npos) kernels::scale(p->value, 25.0f);
}

Tensor ids_of(const std::vector<int32_t>& v) { return test::from_ints(v, {1, static_cast<int64_t>(v.size())}); }

// Greedy decoding by re-running the full forward over the whole sequence for every token.
std::vector<int32_t> greedy_full(nn::GPT& m, std::vector<int32_t> seq, int64_t n) {
  std::vector<int32_t> out;
  nn::GPTActs a;
  const int64_t V = m.config().vocab_size;
  for (int64_t i = 0; i < n; ++i) {
    const Tensor& l = m.forward(ids_of(seq), a);
    const float* row = l.data<float>() + (static_cast<int64_t>(seq.size()) - 1) * V;
    int32_t t = static_cast<int32_t>(std::max_element(row, row + V) - row);
    out.push_back(t);
    seq.push_back(t);
  }
  return out;
}

// The cached forward's logits, one position at a time after a prefill of 3, against the full
// forward's: the same ops, but matmuls over 1 row instead of T, so rounding may differ in the
// last bits; they agree within 1e-5 relative to the logit scale.
TEST(EngineGenerate, CachedForwardMatchesTheFullForward) {
  for (bool llama : {false, true}) {
    nn::GPT m(config(llama));
    sharpen(m);
    std::vector<int32_t> seq = {1, 5, 2, 9, 9, 0, 12, 3, 4, 4, 7};
    const int64_t T = static_cast<int64_t>(seq.size()), V = 13;
    nn::GPTActs a;
    std::vector<double> full = test::to_f64(m.forward(ids_of(seq), a));
    nn::KvCache cache = nn::KvCache::create(m.config(), 2, T);
    Tensor logits;
    std::vector<double> cached;
    m.forward_cached(ids_of({seq.begin(), seq.begin() + 3}), cache, {1}, logits);
    for (double v : test::to_f64(logits)) cached.push_back(v);
    for (int64_t t = 3; t < T; ++t) {
      m.forward_cached(ids_of({seq[t]}), cache, {1}, logits);
      for (double v : test::to_f64(logits)) cached.push_back(v);
    }
    EXPECT_EQ(cache.len[1], T);
    EXPECT_EQ(cache.len[0], 0);
    double scale = 0, worst = 0;
    for (size_t i = 0; i < full.size(); ++i) {
      scale = std::max(scale, std::abs(full[i]));
      worst = std::max(worst, std::abs(full[i] - cached[i]));
    }
    std::printf("%s: max |logit| %.3g, max |cached - full| %.3g over %lld logits\n", llama ? "rope+gqa" : "learned",
                scale, worst, static_cast<long long>(T * V));
    EXPECT_LE(worst, 1e-5 * scale);
  }
}

TEST(EngineGenerate, GreedyWithTheCacheEqualsRerunningTheFullForward) {
  for (bool llama : {false, true}) {
    nn::GPT m(config(llama));
    sharpen(m);
    std::vector<int32_t> prompt = {3, 1, 4, 1, 5};
    GenerateOptions o;
    o.max_new_tokens = 12;
    engine::GenerateResult r = generate(m, {prompt}, o);
    EXPECT_EQ(r.tokens[0], greedy_full(m, prompt, 12)) << (llama ? "rope+gqa" : "learned");
    EXPECT_EQ(r.stats.new_tokens, 12);
    std::printf("ttft %.3g s, inter-token %.3g s, %.0f tokens/s\n", r.stats.time_to_first_token_s,
                r.stats.inter_token_latency_s, r.stats.tokens_per_s);
  }
}

TEST(EngineGenerate, RaggedBatchGivesEachPromptsTokensAlone) {
  for (bool llama : {false, true}) {
    nn::GPT m(config(llama));
    sharpen(m);
    std::vector<std::vector<int32_t>> prompts = {{2, 7}, {1, 2, 3, 4, 5, 6}, {11}, {9, 8, 7}};
    GenerateOptions o;
    o.max_new_tokens = 10;
    engine::GenerateResult batched = generate(m, prompts, o);
    for (size_t b = 0; b < prompts.size(); ++b)
      EXPECT_EQ(batched.tokens[b], generate(m, {prompts[b]}, o).tokens[0]) << "prompt " << b;
  }
}

TEST(EngineGenerate, TopKOneIsGreedyAndSeededSamplingIsReproducible) {
  nn::GPT m(config(true));
  std::vector<std::vector<int32_t>> prompts = {{2, 7}, {1, 2, 3}};
  GenerateOptions g;
  g.max_new_tokens = 15;
  GenerateOptions k1 = g;
  k1.temperature = 1.0f;
  k1.top_k = 1;
  k1.seed = 99;
  EXPECT_EQ(generate(m, prompts, k1).tokens, generate(m, prompts, g).tokens);
  GenerateOptions s = g;
  s.temperature = 1.0f;  // the untrained model is near uniform: draws vary a lot
  s.top_p = 0.9f;
  s.seed = 1;
  auto a = generate(m, prompts, s).tokens, b = generate(m, prompts, s).tokens;
  EXPECT_EQ(a, b);
  s.seed = 2;
  EXPECT_NE(generate(m, prompts, s).tokens, a);
}

TEST(EngineGenerate, SampleTokenCutsToTopKAndTopP) {
  // probabilities at temperature 1: softmax(log p) = p
  std::vector<float> l = {std::log(0.1f), std::log(0.5f), std::log(0.3f), std::log(0.1f)};
  GenerateOptions o;
  EXPECT_EQ(engine::sample_token(l.data(), 4, o, 0.99f), 1);  // greedy ignores u
  o.temperature = 1.0f;
  EXPECT_EQ(engine::sample_token(l.data(), 4, o, 0.0f), 1);   // sorted: 1 (.5), 2 (.3), 0, 3
  EXPECT_EQ(engine::sample_token(l.data(), 4, o, 0.6f), 2);
  EXPECT_EQ(engine::sample_token(l.data(), 4, o, 0.85f), 0);
  EXPECT_EQ(engine::sample_token(l.data(), 4, o, 0.95f), 3);
  o.top_k = 2;  // {1, 2} renormalized: .625, .375
  EXPECT_EQ(engine::sample_token(l.data(), 4, o, 0.6f), 1);
  EXPECT_EQ(engine::sample_token(l.data(), 4, o, 0.99f), 2);
  o.top_k = 0;
  o.top_p = 0.5f;  // the first token alone reaches 0.5
  EXPECT_EQ(engine::sample_token(l.data(), 4, o, 0.99f), 1);
}

TEST(EngineGenerate, StopTokensEndAPromptEarly) {
  nn::GPT m(config(false));
  sharpen(m);
  GenerateOptions o;
  o.max_new_tokens = 8;
  std::vector<int32_t> free_run = generate(m, {{4, 2}}, o).tokens[0];
  o.stop_tokens = {free_run[2]};
  std::vector<int32_t> stopped = generate(m, {{4, 2}, {1}}, o).tokens[0];
  size_t first = std::find(free_run.begin(), free_run.end(), free_run[2]) - free_run.begin();
  EXPECT_EQ(stopped, std::vector<int32_t>(free_run.begin(), free_run.begin() + first + 1));
}

TEST(EngineGenerate, TheCacheIsTaggedKvCacheInTheLedger) {
  nn::GPT m(config(true));  // 2 layers, 2 kv heads of 8
  Ledger& l = ledger_for(Device::cpu());
  const int64_t before = l.current(DT_MEM_KV_CACHE);
  {
    nn::KvCache c = nn::KvCache::create(m.config(), 3, 10);
    EXPECT_EQ(l.current(DT_MEM_KV_CACHE) - before, 2 /*k, v*/ * 2 /*layers*/ * 3 * 10 * 2 * 8 * 4);
  }
  EXPECT_EQ(l.current(DT_MEM_KV_CACHE), before);
}

TEST(EngineGenerate, BadInputsNameTheField) {
  nn::GPT m(config(false));
  GenerateOptions o;
  o.max_new_tokens = 4;
  test::expect_invalid([&] { generate(m, {{1, 13}}, o); }, "prompts[0]: token id 13");
  test::expect_invalid([&] { generate(m, {}, o); }, "prompts");
  test::expect_invalid([&] { generate(m, {{1}, {}}, o); }, "prompts[1]: empty prompt");
  o.max_new_tokens = 21;
  test::expect_invalid([&] { generate(m, {{1, 2, 3, 4}}, o); }, "max_new_tokens 21 exceeds context = 24");
  o.max_new_tokens = 2;
  o.top_p = 0.0f;
  test::expect_invalid([&] { generate(m, {{1}}, o); }, "top_p");
  nn::KvCache c = nn::KvCache::create(m.config(), 1, 4);
  Tensor logits;
  test::expect_invalid([&] { m.forward_cached(test::from_ints({1, 2, 3, 4, 5}, {1, 5}), c, {0}, logits); },
                       "max_len is 4");
  test::expect_invalid([&] { nn::KvCache::create(m.config(), 1, 25); }, "max_len");
}

}  // namespace
}  // namespace dt
