// Serving under mpirun, one rank per process: world rank 0's server schedules and sends
// each step's plan to every process, each runs its part (its tp heads, its pipeline stage,
// its replica), the logits come back to rank 0; the others follow until rank 0's server is
// destroyed. np 2: tp 2, pp 2, and 2 replicas; np 4: 2 replicas x tp 2, and pp 2 x tp 2.
// Every request's tokens equal generate()'s on the single-rank model with the same weights.
#include <map>
#include <mutex>

#include "engine/generate.h"
#include "mpi/mpi_train_checks.h"
#include "serve/server.h"

namespace dt::comm::mpitest {
namespace {

const std::vector<std::vector<int32_t>> kPrompts = {{1, 2, 3}, {4, 5, 6, 7, 8, 9, 10, 11, 12}, {9}, {10, 11}, {1, 2, 3, 4, 5}};

serve::SamplingParams params(size_t i) {
  serve::SamplingParams p;
  p.max_tokens = 5;
  p.temperature = 0.8f;
  p.top_k = 8;
  p.seed = 10 + i;
  return p;
}

TEST_F(MpiTest, ServingAcrossProcessesGivesGeneratesTokens) {
  const int n = world_size();
  std::vector<Coords> cases;
  if (n == 2) cases = {{1, 1, 1, 1, 2}, {1, 2, 1, 1, 1}, {2, 1, 1, 1, 1}};
  if (n == 4) cases = {{2, 1, 1, 1, 2}, {1, 2, 1, 1, 2}};
  if (cases.empty()) GTEST_SKIP() << "needs 2 or 4 processes";
  for (const Coords& axes : cases) {
    nn::GPTConfig cfg = dt::test::tp_tiny_gpt(true, DType::F32);
    cfg.context = 24;
    nn::GPT model(cfg);
    optim::AdamW opt(model.parameters(), dt::test::dp_adamw());
    engine::Trainer t(mpi_mesh(axes), model, opt, dt::test::dp_options(1));
    for (int s = 0; s < 2; ++s) {
      const dt::test::TokenBatch b = dt::test::random_token_batch(8, 16, 32, 40 + s);
      t.train_step(b.in, b.tg);
    }
    serve::EngineConfig ec;
    ec.block_size = 4;
    ec.num_blocks = 16;
    ec.max_num_seqs = 3;
    ec.max_batched_tokens = 6;
    std::mutex mu;
    std::map<int64_t, std::vector<int32_t>> got;
    std::map<int64_t, size_t> which;
    {
      serve::Server server(std::make_unique<serve::ServingEngine>(serve::layout_runner(t.parts_for_inference()), ec));
      if (world_rank() == 0) {
        for (size_t i = 0; i < kPrompts.size(); ++i) {
          const int64_t id = server.submit(kPrompts[i], params(i), [&](const serve::Event& e) {
            std::lock_guard<std::mutex> lk(mu);
            if (e.token >= 0) got[e.id].push_back(e.token);
          });
          std::lock_guard<std::mutex> lk(mu);
          which[id] = i;
        }
        EXPECT_TRUE(server.drain(60));
        EXPECT_EQ(server.stats_json()["requests"]["finished"], 5);
      } else {
        EXPECT_THROW(server.submit(kPrompts[0], params(0), nullptr), Error) << "only rank 0 takes requests";
        // Returns once rank 0's server is gone (below, at the end of its scope).
        EXPECT_TRUE(server.drain(60)) << "the follower did not see rank 0 stop";
      }
    }
    t.gather_model();  // collective: the host model whole on every process
    if (world_rank() == 0)
      for (const auto& [id, i] : which) {
        engine::GenerateOptions g;
        g.max_new_tokens = 5;
        g.temperature = 0.8f;
        g.top_k = 8;
        g.seed = 10 + i;
        EXPECT_EQ(got[id], engine::generate(model, {kPrompts[i]}, g).tokens[0])
            << "request " << i << ", axes dp " << axes[kDp] << " pp " << axes[kPp] << " tp " << axes[kTp];
      }
  }
}

}  // namespace
}  // namespace dt::comm::mpitest
