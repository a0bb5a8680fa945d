// The serving engine's bookkeeping without a model: the block pool (refcounts, prefix
// cache, LRU eviction, hash collisions) and the continuous-batching scheduler (token
// budget, chunked prefill, preemption, aborts), with the accounting invariant checked after
// every step of a long random run.
#include <random>

#include "serve/scheduler.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

using serve::BlockPool;
using serve::Scheduler;
using serve::SeqState;

TEST(ServeBlockPool, RefcountsPrefixCacheAndLru) {
  BlockPool p(4, 2);
  EXPECT_EQ(p.counts(), (serve::BlockCounts{0, 0, 4}));
  const int32_t a = p.allocate(), b = p.allocate();
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  const int32_t ta[2] = {7, 8}, tb[2] = {9, 9};
  const uint64_t ha = BlockPool::chain_hash(0, ta, 2), hb = BlockPool::chain_hash(ha, tb, 2);
  EXPECT_NE(ha, BlockPool::chain_hash(1, ta, 2));  // the parent is part of the key
  p.publish(a, ha, 0, ta);
  p.publish(b, hb, ha, tb);
  EXPECT_EQ(p.lookup(ha, 0, ta), a);  // shared: refcount 2
  EXPECT_EQ(p.refcount(a), 2);
  const int32_t other[2] = {7, 9};
  EXPECT_EQ(p.lookup(ha, 0, other), -1) << "same hash, other tokens: a collision must miss";
  EXPECT_EQ(p.lookup(ha, 5, ta), -1) << "same hash and tokens, another prefix: a collision must miss";
  p.release(a);
  p.release(a);
  p.release(b);
  EXPECT_EQ(p.counts(), (serve::BlockCounts{0, 2, 2}));  // both cached, still findable
  EXPECT_EQ(p.check(), "");
  EXPECT_EQ(p.lookup(hb, ha, tb), b);  // a cached block comes back into use
  p.release(b);                    // now b was released after a: a is the LRU victim
  EXPECT_GE(p.allocate(), 2);
  EXPECT_GE(p.allocate(), 2);  // the free ones first
  EXPECT_EQ(p.allocate(), a);  // then evict the least recently released
  EXPECT_EQ(p.lookup(ha, 0, ta), -1);
  EXPECT_EQ(p.allocate(), b);
  EXPECT_EQ(p.allocate(), -1);
  EXPECT_EQ(p.evictions(), 2);
  EXPECT_EQ(p.check(), "");
  EXPECT_THROW(BlockPool(0, 16), Error);
}

std::unique_ptr<serve::Sequence> request(int64_t id, int64_t prompt_len, int64_t max_tokens, int32_t first = 1) {
  auto s = std::make_unique<serve::Sequence>();
  s->id = id;
  for (int64_t i = 0; i < prompt_len; ++i) s->tokens.push_back(first + static_cast<int32_t>(i % 5));
  s->prompt_len = prompt_len;
  s->params.max_tokens = max_tokens;
  return s;
}

serve::SchedulerConfig config(int64_t seqs, int64_t tokens, int64_t len = 64) {
  serve::SchedulerConfig c;
  c.max_num_seqs = seqs;
  c.max_batched_tokens = tokens;
  c.max_model_len = len;
  return c;
}

TEST(ServeScheduler, MixesDecodesWithChunkedPrefill) {
  BlockPool pool(32, 4);
  Scheduler s(pool, config(8, 6));
  EXPECT_EQ(s.add(request(1, 3, 4)), nullptr);
  EXPECT_EQ(s.add(request(2, 10, 2)), nullptr);
  serve::StepPlan p = s.schedule();  // 1 prefills whole (3), 2 gets the rest of the budget (3)
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].count, 3);
  EXPECT_TRUE(p.chunks[0].sample);
  EXPECT_EQ(p.chunks[1].count, 3);
  EXPECT_FALSE(p.chunks[1].sample) << "a partial prefill has no next token yet";
  s.commit(p, {11});
  p = s.schedule();  // 1 decodes one token; 2 continues its prefill with 5 of its 7
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].count, 1);
  EXPECT_EQ(p.chunks[1].begin, 3);
  EXPECT_EQ(p.chunks[1].count, 5);
  EXPECT_EQ(p.tokens, 6);
  s.commit(p, {12});
  EXPECT_EQ(s.check(), "");
  // Too long for the context, or for the whole cache: rejected at once, with the reason.
  auto r = s.add(request(3, 60, 10));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->state, SeqState::Rejected);
  EXPECT_NE(r->reason.find("context"), std::string::npos) << r->reason;
  BlockPool tiny(2, 4);
  Scheduler t(tiny, config(4, 64));
  r = t.add(request(4, 8, 4));
  ASSERT_NE(r, nullptr);
  EXPECT_NE(r->reason.find("KV blocks"), std::string::npos) << r->reason;
}

TEST(ServeScheduler, PreemptsTheNewestWhenBlocksRunOut) {
  BlockPool pool(4, 4);  // 16 positions
  Scheduler s(pool, config(4, 64));
  s.add(request(1, 4, 8));
  s.add(request(2, 4, 8));
  serve::StepPlan p = s.schedule();
  s.commit(p, {1, 1});  // each holds one full block and now needs a second
  p = s.schedule();
  s.commit(p, {1, 1});
  for (int i = 0; i < 4 && s.stats().preemptions == 0; ++i) {
    p = s.schedule();
    std::vector<int32_t> toks(p.chunks.size(), 2);
    s.commit(p, toks);
    EXPECT_EQ(s.check(), "");
  }
  EXPECT_GE(s.stats().preemptions, 1);
  const auto live = s.live();
  // The first admitted keeps running; the newest was sent back and holds nothing.
  EXPECT_EQ(live[0]->state, SeqState::Running);
  EXPECT_EQ(live[1]->state, SeqState::Preempted);
  EXPECT_TRUE(live[1]->blocks.empty());
}

TEST(ServeScheduler, PrefixCacheSharesFullBlocks) {
  BlockPool pool(16, 4);
  Scheduler s(pool, config(4, 64));
  s.add(request(1, 10, 1));
  serve::StepPlan p = s.schedule();
  s.commit(p, {3});  // finished: its two full blocks stay cached
  EXPECT_EQ(pool.counts().cached, 2);
  s.add(request(2, 9, 2));  // the same first 8 tokens
  p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].begin, 8) << "8 positions found in the prefix cache";
  EXPECT_EQ(p.chunks[0].count, 1);
  EXPECT_EQ(s.live()[0]->prefix_hit_tokens, 8);
  EXPECT_EQ(s.check(), "");
  s.add(request(3, 8, 2));  // exactly two blocks: only the first is reused (the last token is computed)
  p = s.schedule();
  EXPECT_EQ(p.chunks.back().begin, 4);
}

// A long random run: arrivals, aborts at random moments, tight memory. The accounting
// invariant holds after every step, every request ends, and the pool comes back whole.
TEST(ServeScheduler, RandomLoadKeepsTheBooks) {
  for (bool prefix : {true, false}) {
    BlockPool pool(8, 4);
    serve::SchedulerConfig c = config(4, 12, 32);
    c.prefix_caching = prefix;
    Scheduler s(pool, c);
    std::mt19937 rng(11);
    int64_t next = 0, ended = 0;
    for (int step = 0; step < 3000 && (next < 200 || !s.idle()); ++step) {
      if (next < 200 && rng() % 2 == 0) {
        auto r = s.add(request(next, 1 + rng() % 14, 1 + rng() % 10, static_cast<int32_t>(rng() % 3)));
        ++next;
        if (r) ++ended;
      }
      if (rng() % 10 == 0 && !s.idle()) {
        const auto live = s.live();
        if (s.abort(live[rng() % live.size()]->id)) ++ended;
      }
      serve::StepPlan p = s.schedule();
      std::vector<int32_t> toks;
      for (const auto& ch : p.chunks)
        if (ch.sample) toks.push_back(static_cast<int32_t>(rng() % 4));
      ended += static_cast<int64_t>(s.commit(p, toks).size());
      ASSERT_EQ(s.check(), "") << "step " << step;
    }
    EXPECT_EQ(next, 200);
    EXPECT_EQ(ended, 200) << "every request ends";
    EXPECT_TRUE(s.idle());
    EXPECT_EQ(pool.counts().used, 0);
    EXPECT_EQ(pool.counts().free + pool.counts().cached, 8);
    if (!prefix) EXPECT_EQ(pool.counts().free, 8);
    EXPECT_GT(s.stats().preemptions, 0);
  }
}

}  // namespace
}  // namespace dt
