// The serving engine against generation: every request's tokens equal engine::generate's
// for its prompt alone with the same options (greedy and seeded sampling), whatever else
// is in the batch, when requests arrive over time, prefill in chunks, are preempted and
// recomputed, or share a cached prefix; on one model and over a mesh (tp 2, pp 2, dp 2
// replicas behind the router). Overload: 200 requests against an 8-block pool with 20%
// (40) aborted at random moments all end, and the pool comes back to its starting state.
#include <map>
#include <random>

#include "engine/generate.h"
#include "multirank/coll_util.h"
#include "multirank/dp_test_util.h"
#include "serve/engine.h"

namespace dt {
namespace DT_TEST_NS {

nn::GPTConfig config(bool llama) {
  nn::GPTConfig c = test::tp_tiny_gpt(llama, DType::F32);
  c.n_layer = 2;
  c.context = 32;
  return c;
}

// Prompts of mixed lengths; the last two share their first 8 tokens with the first.
const std::vector<std::vector<int32_t>> kPrompts = {
    {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {4, 5}, {9}, {12, 13, 14, 15, 16, 17, 18}, {30, 29, 28},
    {1, 2, 3, 4, 5, 6, 7, 8, 20, 21},   {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 31}};

serve::SamplingParams params(size_t i, bool sampled) {
  serve::SamplingParams p;
  p.max_tokens = 4 + static_cast<int64_t>(i % 4);
  if (sampled) {
    p.temperature = 0.9f;
    p.top_k = 8;
    p.seed = 100 + i;
  }
  p.stop_tokens = {3};
  return p;
}

std::vector<int32_t> reference(nn::GPT& model, size_t i, bool sampled) {
  const serve::SamplingParams p = params(i, sampled);
  engine::GenerateOptions g;
  g.max_new_tokens = p.max_tokens;
  g.temperature = p.temperature;
  g.top_k = p.top_k;
  g.seed = p.seed;
  g.stop_tokens = p.stop_tokens;
  return engine::generate(model, {kPrompts[i]}, g).tokens[0];
}

// Runs the prompts through the engine, adding one every other step, checking the block
// accounting after every step; returns each request's tokens.
std::map<int64_t, std::vector<int32_t>> serve_all(serve::ServingEngine& e, bool sampled) {
  std::map<int64_t, std::vector<int32_t>> out;
  std::map<int64_t, bool> done;
  std::vector<serve::Event> ev;
  size_t next = 0;
  for (int step = 0; step < 500 && (next < kPrompts.size() || !e.idle()); ++step) {
    if (next < kPrompts.size() && step % 2 == 0) {
      e.add(static_cast<int64_t>(next), kPrompts[next], params(next, sampled), ev);
      ++next;
    }
    e.step(ev);
    EXPECT_EQ(e.check(), "") << "step " << step;
    for (const serve::Event& x : ev) {
      EXPECT_FALSE(done[x.id]) << "an event after the end of " << x.id;
      if (x.token >= 0) out[x.id].push_back(x.token);
      if (x.done) {
        done[x.id] = true;
        EXPECT_EQ(x.state, serve::SeqState::Finished) << x.reason;
      }
    }
    ev.clear();
  }
  EXPECT_EQ(done.size(), kPrompts.size());
  return out;
}

void train_two_steps(engine::Trainer& t) {
  for (int s = 0; s < 2; ++s) {
    const test::TokenBatch b = test::random_token_batch(8, 16, 32, 40 + s);
    t.train_step(b.in, b.tg);
  }
}

serve::EngineConfig small_cache(int64_t blocks) {
  serve::EngineConfig c;
  c.block_size = 4;
  c.num_blocks = blocks;
  c.max_num_seqs = 4;
  c.max_batched_tokens = 7;  // long prompts prefill over several steps, beside decodes
  return c;
}

TEST(ServeEngine, OneModelGivesGeneratesTokens) {
  for (bool llama : {false, true}) {
    nn::GPT model(config(llama));
    optim::AdamW opt(model.parameters(), test::dp_adamw());
    engine::Trainer t(comm::test::axes_mesh({1, 1, 1, 1, 1}), model, opt, test::dp_options(1));
    train_two_steps(t);
    t.gather_model();
    for (bool sampled : {false, true})
      for (int64_t blocks : {64, 8}) {  // 8 blocks: preemption and recompute
        serve::ServingEngine e(serve::single_model_runner(t.model(0)), small_cache(blocks));
        const auto got = serve_all(e, sampled);
        for (size_t i = 0; i < kPrompts.size(); ++i)
          EXPECT_EQ(got.at(static_cast<int64_t>(i)), reference(t.model(0), i, sampled))
              << "request " << i << (llama ? " llama" : " gpt") << (sampled ? " sampled" : " greedy") << ", "
              << blocks << " blocks";
        const nlohmann::json st = e.stats_json();
        if (blocks == 8) EXPECT_GT(st["preemptions"].get<int64_t>(), 0) << st.dump();
        EXPECT_GT(st["kv_cache"]["prefix_hit_tokens"].get<int64_t>(), 0) << "the shared prefixes were reused";
        EXPECT_EQ(st["kv_cache"]["used_blocks"].get<int64_t>(), 0);
      }
  }
}

TEST(ServeEngine, MeshLayoutsGiveGeneratesTokens) {
  struct Case {
    int dp, pp, tp;
    bool llama;
  };
  for (const Case& k : {Case{1, 1, 2, true}, Case{1, 2, 1, false}, Case{2, 1, 1, false}, Case{1, 2, 2, true}}) {
    nn::GPT model(config(k.llama));
    optim::AdamW opt(model.parameters(), test::dp_adamw());
    engine::Trainer t(comm::test::axes_mesh({k.dp, k.pp, 1, 1, k.tp}), model, opt, test::dp_options(2));
    train_two_steps(t);
    serve::ServingEngine e(serve::layout_runner(t.parts_for_inference()), small_cache(64));
    const auto got = serve_all(e, true);
    t.gather_model();
    const std::string what = "dp " + std::to_string(k.dp) + " x pp " + std::to_string(k.pp) + " x tp " +
                             std::to_string(k.tp);
    for (size_t i = 0; i < kPrompts.size(); ++i)
      EXPECT_EQ(got.at(static_cast<int64_t>(i)), reference(model, i, true)) << what << ", request " << i;
    if (k.dp == 2) {  // the router spread the requests over both replicas
      EXPECT_EQ(e.replicas(), 2);
      EXPECT_GT(e.scheduler(1).stats().prompt_tokens, 0);
    }
  }
}

TEST(ServeEngine, OverloadEndsEveryRequestAndFreesThePool) {
  nn::GPT model(config(false));
  serve::EngineConfig c = small_cache(8);
  serve::ServingEngine e(serve::single_model_runner(model), c);
  std::mt19937 rng(3);
  std::map<int64_t, serve::SeqState> end;
  std::vector<serve::Event> ev;
  int64_t next = 0, aborts = 0;
  for (int step = 0; step < 5000 && (next < 200 || !e.idle()); ++step) {
    for (int k = 0; k < 2 && next < 200; ++k) {  // arrivals outpace the engine
      std::vector<int32_t> prompt(1 + rng() % 12);
      for (auto& t : prompt) t = static_cast<int32_t>(rng() % 32);
      serve::SamplingParams p;
      p.max_tokens = 1 + rng() % 24;  // some cannot fit the 8 x 4 positions: rejected
      p.temperature = 0.8f;
      p.seed = static_cast<uint64_t>(next);
      e.add(next++, prompt, p, ev);
    }
    if (aborts < 40 && rng() % 3 == 0 && e.active() > 0) {  // 40 of the 200 (20%), at random moments
      const std::vector<int64_t> live = e.live_ids();
      if (e.abort(live[rng() % live.size()], ev)) ++aborts;
    }
    e.step(ev);
    ASSERT_EQ(e.check(), "") << "step " << step;
    for (const serve::Event& x : ev)
      if (x.done) {
        EXPECT_FALSE(end.count(x.id)) << "request " << x.id << " ended twice";
        end[x.id] = x.state;
        if (x.state == serve::SeqState::Rejected) EXPECT_FALSE(x.reason.empty());
      }
    ev.clear();
  }
  EXPECT_EQ(end.size(), 200u) << "every request reached a terminal state";
  std::map<serve::SeqState, int> by;
  for (const auto& [id, s] : end) ++by[s];
  EXPECT_GT(by[serve::SeqState::Finished], 0);
  EXPECT_GT(by[serve::SeqState::Rejected], 0);
  EXPECT_EQ(aborts, 40);
  EXPECT_EQ(by[serve::SeqState::Aborted], 40);
  const nlohmann::json st = e.stats_json();
  EXPECT_EQ(st["kv_cache"]["used_blocks"].get<int64_t>(), 0);
  EXPECT_EQ(st["kv_cache"]["free_blocks"].get<int64_t>() + st["kv_cache"]["cached_blocks"].get<int64_t>(), 8);
  EXPECT_GT(st["preemptions"].get<int64_t>(), 0);
}

}  // namespace
}  // namespace dt
