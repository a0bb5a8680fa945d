// Serving's OpenAI sampling options against references computed here, from the model's own
// logits (a full forward over the prompt and the output so far): log-probabilities (the raw
// row's log-softmax, top k), logit_bias, and the repetition, presence and frequency
// penalties (greedy, so each token must be the argmax of the adjusted row); a request gives
// the same tokens and log-probabilities alone and in a batch of others (chunked prefill,
// preemption); bad values are refused with the key named.
#include <algorithm>
#include <cmath>
#include <map>

#include "engine/sampling.h"
#include "serve/engine.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

constexpr int64_t V = 40;
using Rows = std::vector<std::vector<double>>;

nn::GPTConfig config() {
  nn::GPTConfig c;
  c.vocab_size = V;
  c.context = 48;
  c.n_layer = 2;
  c.d_model = 32;
  c.n_head = 4;
  c.d_ff = 64;
  c.seed = 11;
  return c;
}

// Random init gives near-uniform logits; scaled weights give margins between tokens well
// above f32 rounding, so comparisons of drawn tokens test the code, not luck.
void sharpen(nn::GPT& m) {
  for (nn::Parameter* p : m.parameters())
    if (p->name.find("ln") == std::string::npos) kernels::scale(p->value, 4.0f);
}

serve::EngineConfig cache(int64_t blocks) {
  serve::EngineConfig c;
  c.block_size = 4;
  c.num_blocks = blocks;
  c.max_num_seqs = 4;
  c.max_batched_tokens = 7;  // long prompts prefill over several steps, beside decodes
  return c;
}

struct Out {
  std::vector<int32_t> tokens;
  std::vector<engine::TokenLogprobs> lps;  // one per token when asked
};
using Request = std::pair<std::vector<int32_t>, serve::SamplingParams>;

// Runs the requests (one added every other step), checking the block accounting.
std::map<int64_t, Out> serve_all(serve::ServingEngine& e, const std::vector<Request>& reqs) {
  std::map<int64_t, Out> out;
  std::vector<serve::Event> ev;
  size_t next = 0, ended = 0;
  for (int step = 0; step < 1000 && (next < reqs.size() || !e.idle()); ++step) {
    if (next < reqs.size() && step % 2 == 0) {
      e.add(static_cast<int64_t>(next), reqs[next].first, reqs[next].second, ev);
      ++next;
    }
    e.step(ev);
    EXPECT_EQ(e.check(), "");
    for (const serve::Event& x : ev) {
      if (x.token >= 0) {
        out[x.id].tokens.push_back(x.token);
        EXPECT_EQ(x.logprobs != nullptr, reqs[static_cast<size_t>(x.id)].second.logprobs >= 0);
        if (x.logprobs) out[x.id].lps.push_back(*x.logprobs);
      }
      if (x.done) {
        ++ended;
        EXPECT_EQ(x.state, serve::SeqState::Finished) << x.reason;
      }
    }
    ev.clear();
  }
  EXPECT_EQ(ended, reqs.size());
  return out;
}

Out serve_one(nn::GPT& m, const Request& r) {
  serve::ServingEngine e(serve::single_model_runner(m), cache(64));
  return serve_all(e, {r})[0];
}

// The model's logits at every position of `seq` (a full forward, no cache).
Rows full_logits(nn::GPT& m, const std::vector<int32_t>& seq) {
  nn::GPTActs a;
  const std::vector<double> l =
      test::to_f64(m.forward(test::from_ints(seq, {1, static_cast<int64_t>(seq.size())}), a));
  Rows rows(seq.size());
  for (size_t t = 0; t < seq.size(); ++t) rows[t].assign(l.begin() + t * V, l.begin() + (t + 1) * V);
  return rows;
}

// The raw row that gave output token i: position prompt_len - 1 + i of prompt + output.
Rows rows_for_output(nn::GPT& m, const std::vector<int32_t>& prompt, const std::vector<int32_t>& out) {
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), out.begin(), out.end());
  const Rows all = full_logits(m, seq);
  return Rows(all.begin() + static_cast<std::ptrdiff_t>(prompt.size() - 1), all.end() - 1);
}

std::vector<double> log_softmax(const std::vector<double>& row) {
  const double mx = *std::max_element(row.begin(), row.end());
  double z = 0;
  for (double x : row) z += std::exp(x - mx);
  std::vector<double> out;
  for (double x : row) out.push_back(x - mx - std::log(z));
  return out;
}

// The adjustments as the C API documents them, written out plainly (per token id).
std::vector<double> adjusted(std::vector<double> row, const serve::SamplingParams& p,
                             const std::vector<int32_t>& prompt, const std::vector<int32_t>& out_so_far) {
  for (const auto& [id, bias] : p.adjust.logit_bias) row[static_cast<size_t>(id)] += bias;
  for (int32_t t = 0; t < V; ++t) {
    const auto in = [t](const std::vector<int32_t>& v) { return std::count(v.begin(), v.end(), t); };
    double& x = row[static_cast<size_t>(t)];
    if (in(prompt) + in(out_so_far) > 0) x = x > 0 ? x / p.adjust.repetition_penalty : x * p.adjust.repetition_penalty;
    const auto c = static_cast<double>(in(out_so_far));
    x -= p.adjust.presence_penalty * (c > 0 ? 1 : 0) + p.adjust.frequency_penalty * c;
  }
  return row;
}

const std::vector<int32_t> kPrompt = {5, 17, 3, 3, 28, 9, 12};

serve::SamplingParams greedy(int64_t n) {
  serve::SamplingParams p;
  p.max_tokens = n;
  return p;
}

TEST(ServeSampling, LogitsAdjustByHand) {
  const std::vector<float> row = {1.0f, -1.0f, 2.0f, 0.5f, -0.5f};
  const std::vector<int32_t> tokens = {0, 1, 2, 2, 3};  // prompt {0, 1}, output {2, 2, 3}
  engine::LogitsAdjust a;
  EXPECT_FALSE(a.active());
  std::vector<float> r = row;
  a.apply(r.data(), 5, tokens, 2);
  EXPECT_EQ(r, row) << "the defaults change nothing";
  a.logit_bias = {{4, 1.0f}};
  a.repetition_penalty = 2.0f;  // 0..3 seen: 1 -> .5, -1 -> -2, 2 -> 1, .5 -> .25
  a.presence_penalty = 0.5f;
  a.frequency_penalty = 0.25f;  // 2 (twice): 1 - .5 - .5; 3 (once): .25 - .5 - .25
  a.apply(r.data(), 5, tokens, 2);
  EXPECT_EQ(r, (std::vector<float>{0.5f, -2.0f, 0.0f, -0.5f, 0.5f}));
}

TEST(ServeSampling, TokenLogprobsAreLogSoftmaxWithTopKByValueThenId) {
  const std::vector<float> row = {0.0f, 1.0f, 1.0f, -1.0f};
  const engine::TokenLogprobs lp = engine::token_logprobs(row.data(), 4, 3, 3);
  const double lse = std::log(1 + 2 * std::exp(1.0) + std::exp(-1.0));
  EXPECT_NEAR(lp.logprob, -1.0 - lse, 1e-6);
  EXPECT_EQ(lp.top_ids, (std::vector<int32_t>{1, 2, 0}));
  EXPECT_NEAR(lp.top_logprobs[0], 1.0 - lse, 1e-6);
  EXPECT_NEAR(lp.top_logprobs[2], -lse, 1e-6);
  EXPECT_EQ(engine::token_logprobs(row.data(), 4, 0, 9).top_ids.size(), 4u);
  EXPECT_TRUE(engine::token_logprobs(row.data(), 4, 0, 0).top_ids.empty());
}

TEST(ServeSampling, LogprobsAreTheRawLogSoftmaxOfTheModelsLogits) {
  nn::GPT m(config());
  sharpen(m);
  serve::SamplingParams g = greedy(8), s = greedy(8);
  g.logprobs = 5;
  s.logprobs = 3;
  s.temperature = 0.9f;
  s.top_k = 8;
  s.seed = 21;
  // Adjusted draws: the log-probabilities must still be the model's, before any change.
  s.adjust.presence_penalty = 1.0f;
  s.adjust.repetition_penalty = 1.5f;
  s.adjust.logit_bias = {{7, 3.0f}};
  for (const serve::SamplingParams& p : {g, s}) {
    const Out o = serve_one(m, {kPrompt, p});
    ASSERT_EQ(o.lps.size(), o.tokens.size());
    const Rows rows = rows_for_output(m, kPrompt, o.tokens);
    for (size_t i = 0; i < o.tokens.size(); ++i) {
      const std::vector<double> ref = log_softmax(rows[i]);
      const engine::TokenLogprobs& lp = o.lps[i];
      EXPECT_NEAR(lp.logprob, ref[static_cast<size_t>(o.tokens[i])], 1e-4) << "token " << i;
      ASSERT_EQ(lp.top_ids.size(), static_cast<size_t>(p.logprobs));
      std::vector<double> sorted = ref;
      std::sort(sorted.rbegin(), sorted.rend());
      for (size_t j = 0; j < lp.top_ids.size(); ++j) {
        // Each alternative's value is the reference's for its id, and the j-th largest.
        EXPECT_NEAR(lp.top_logprobs[j], ref[static_cast<size_t>(lp.top_ids[j])], 1e-4) << i << "/" << j;
        EXPECT_NEAR(lp.top_logprobs[j], sorted[j], 1e-4) << i << "/" << j;
        if (j > 0) EXPECT_GE(lp.top_logprobs[j - 1], lp.top_logprobs[j]);
      }
    }
  }
}

TEST(ServeSampling, GreedyFollowsLogitBias) {
  nn::GPT m(config());
  sharpen(m);
  serve::SamplingParams p = greedy(6);
  const std::vector<int32_t> plain = serve_one(m, {kPrompt, p}).tokens;
  p.adjust.logit_bias = {{7, 100.0f}};
  EXPECT_EQ(serve_one(m, {kPrompt, p}).tokens, std::vector<int32_t>(6, 7));
  p.adjust.logit_bias = {{plain[0], -100.0f}};  // the greedy choice, banned
  const std::vector<int32_t> banned = serve_one(m, {kPrompt, p}).tokens;
  EXPECT_EQ(std::count(banned.begin(), banned.end(), plain[0]), 0);
}

TEST(ServeSampling, GreedyPenaltiesTakeTheArgmaxOfTheAdjustedRow) {
  nn::GPT m(config());
  sharpen(m);
  const std::vector<int32_t> plain = serve_one(m, {kPrompt, greedy(12)}).tokens;
  std::vector<serve::SamplingParams> cases(4, greedy(12));
  cases[0].adjust.presence_penalty = 2.0f;
  cases[1].adjust.frequency_penalty = 1.0f;
  cases[2].adjust.repetition_penalty = 2.0f;
  cases[3].adjust.presence_penalty = -0.5f;  // a negative penalty favours repeats
  cases[3].adjust.frequency_penalty = 0.75f;
  cases[3].adjust.repetition_penalty = 1.3f;
  cases[3].adjust.logit_bias = {{plain[1], -1.5f}, {30, 0.5f}};
  for (size_t c = 0; c < cases.size(); ++c) {
    const serve::SamplingParams& p = cases[c];
    const std::vector<int32_t> got = serve_one(m, {kPrompt, p}).tokens;
    EXPECT_NE(got, plain) << "case " << c << ": the adjustment changed nothing; the test proves nothing";
    const Rows rows = rows_for_output(m, kPrompt, got);
    for (size_t i = 0; i < got.size(); ++i) {
      const std::vector<double> a = adjusted(rows[i], p, kPrompt, {got.begin(), got.begin() + i});
      const double best = *std::max_element(a.begin(), a.end());
      EXPECT_GE(a[static_cast<size_t>(got[i])], best - 1e-4) << "case " << c << ", token " << i;
    }
  }
}

TEST(ServeSampling, ARequestGivesTheSameAloneAndInABatch) {
  nn::GPT m(config());
  sharpen(m);
  serve::SamplingParams x = greedy(10);
  x.temperature = 0.8f;
  x.seed = 5;
  x.logprobs = 4;
  x.adjust.presence_penalty = 0.5f;
  x.adjust.frequency_penalty = 0.3f;
  x.adjust.repetition_penalty = 1.2f;
  x.adjust.logit_bias = {{2, 1.0f}};
  const Out alone = serve_one(m, {kPrompt, x});
  std::vector<Request> reqs;
  for (int i = 0; i < 6; ++i) {
    serve::SamplingParams p = greedy(5 + i);
    p.temperature = i % 2 ? 1.0f : 0.0f;
    p.seed = static_cast<uint64_t>(i);
    p.adjust.frequency_penalty = 0.1f * static_cast<float>(i);
    p.logprobs = i % 3 - 1;
    reqs.push_back({{static_cast<int32_t>(i), 5, 17, static_cast<int32_t>(30 - i), 3}, p});
  }
  reqs.insert(reqs.begin() + 2, {kPrompt, x});
  for (int64_t blocks : {64, 10}) {  // 10: preemption and recompute
    serve::ServingEngine e(serve::single_model_runner(m), cache(blocks));
    const Out got = serve_all(e, reqs)[2];
    EXPECT_EQ(got.tokens, alone.tokens) << blocks << " blocks";
    ASSERT_EQ(got.lps.size(), alone.lps.size());
    for (size_t i = 0; i < got.lps.size(); ++i) {
      EXPECT_NEAR(got.lps[i].logprob, alone.lps[i].logprob, 1e-4);
      EXPECT_EQ(got.lps[i].top_ids, alone.lps[i].top_ids);
    }
    if (blocks == 10) EXPECT_GT(e.stats_json()["preemptions"].get<int64_t>(), 0);
  }
}

TEST(ServeSampling, BadValuesNameTheirKey) {
  nn::GPT m(config());
  serve::ServingEngine e(serve::single_model_runner(m), cache(16));
  auto refused = [&](const std::function<void(serve::SamplingParams&)>& set, const std::string& needle) {
    serve::SamplingParams p;
    set(p);
    test::expect_invalid([&] { e.check_request(kPrompt, p); }, needle);
  };
  refused([](auto& p) { p.adjust.presence_penalty = 2.5f; }, "presence_penalty = 2.5");
  refused([](auto& p) { p.adjust.frequency_penalty = -2.01f; }, "frequency_penalty");
  refused([](auto& p) { p.adjust.frequency_penalty = NAN; }, "accepted: [-2, 2]");
  refused([](auto& p) { p.adjust.repetition_penalty = 0.0f; }, "repetition_penalty = 0");
  refused([](auto& p) { p.adjust.repetition_penalty = 2.5f; }, "accepted: (0, 2]");
  refused([](auto& p) { p.adjust.logit_bias = {{V, 1.0f}}; }, "logit_bias: token id 40 is outside");
  refused([](auto& p) { p.adjust.logit_bias = {{1, 100.5f}}; }, "accepted: [-100, 100]");
  refused([](auto& p) { p.adjust.logit_bias = {{1, 1.0f}, {3, 0.0f}, {1, 2.0f}}; }, "token id 1 appears twice");
  refused([](auto& p) { p.logprobs = 21; }, "logprobs = 21; accepted: [0, 20]");
  refused([](auto& p) { p.logprobs = -2; }, "logprobs");
  serve::SamplingParams many;
  for (int32_t t = 0; t < 301; ++t) many.adjust.logit_bias.push_back({t, 1.0f});
  test::expect_invalid([&] { e.check_request(kPrompt, many); }, "logit_bias: 301 entries; accepted: at most 300");
}

}  // namespace
}  // namespace dt
