// A mixture-of-experts GPT (nn/moe.h) trained on the local backend's layouts against one
// rank on the same global batches (DESIGN §4): dp 2 with DDP and ZeRO-1/2/3, pp 2 (1F1B),
// dp 2 x pp 2; top-1 and top-2, dropless and with a capacity factor. The auxiliary losses
// are per micro-batch (as Megatron's), so the reference runs the micro-batches each layout's
// ranks run: one rank with M = 4 against dp 2 with M = 2 (each rank's two are two of the
// four). Expert parallelism (experts split over ep ranks, tokens moved by all-to-all): ep 2
// and 4, dp 2 x ep 2, pp 2 x ep 2, dp 2 x ep 2 with ZeRO-1/2/3, dp 2 x pp 2 x ep 2 with
// ZeRO-1. 10 AdamW steps with clipping and a warmup-cosine
// schedule; f32 within 2e-5 relative (loss per step, gradient norms, final parameters).
// tp 2 and ep 2 x tp 2 with sequence parallelism (each tp rank routing its own rows); a
// gated shared expert (Qwen2-MoE) on ep 2, dp 2 x ep 2 ZeRO-2, ep 2 x tp 2 + SP, pp 2 x ep 2. Also:
// experts with tp > 1 without SP, experts not divisible by ep, ZeRO with ep and dp = 1 and ep
// without experts are refused by name.
#include <cstdio>

#include "engine/plan.h"
#include "multirank/coll_util.h"
#include "multirank/dp_test_util.h"
#include "nn/expert_exchange.h"

namespace dt {
namespace DT_TEST_NS {

constexpr int kSteps = 10;
using test::kSanitized;

nn::GPTConfig config(int64_t top_k, float capacity) {
  nn::GPTConfig c = test::tp_tiny_gpt(/*llama=*/true, DType::F32);
  c.n_layer = 4;
  c.n_experts = 4;
  c.d_ff = 48;
  c.top_k = top_k;
  c.moe_capacity = capacity;
  return c;
}

test::TokenBatch batch(int s) {
  test::TokenBatch b = test::random_token_batch(8, 16, 32, 500 + s % 3);
  b.tg.data<int32_t>()[5] = -1;  // an ignored target
  return b;
}

test::TrainRun train(std::shared_ptr<comm::Mesh> mesh, const nn::GPTConfig& c, int64_t micro,
                     const engine::ParallelOptions& par = {}) {
  return test::train_layout(std::move(mesh), c, test::dp_options(micro), par, kSteps, batch);
}

std::shared_ptr<comm::Mesh> mesh(int dp, int pp, int tp = 1, int ep = 1) {
  return comm::test::axes_mesh({dp, pp, ep, 1, tp});
}

// Runs f(config, its name, one rank's run with 4 micro-batches) for each routing case: top
// 2 and top 1 dropless, top 2 with a capacity factor of 1.0 (top 1 not in sanitizer builds).
template <class F> void for_each_routing(F&& f) {
  struct Case {
    int64_t top_k;
    float capacity;
  };
  for (Case k : {Case{2, 0.0f}, Case{1, 0.0f}, Case{2, 1.0f}}) {
    if (kSanitized && k.top_k == 1) continue;
    const nn::GPTConfig c = config(k.top_k, k.capacity);
    f(c, "top " + std::to_string(k.top_k) + (k.capacity > 0 ? " capacity 1.0" : " dropless"), train(nullptr, c, 4));
  }
}

TEST(MoeTrain, DataParallelZeroAndPipelineMatchSingleRankTraining) {
  for_each_routing([](const nn::GPTConfig& c, const std::string& what, const test::TrainRun& ref) {
    for (int zero : {0, 1, 2, 3}) {
      if (kSanitized && (zero == 1 || zero == 3)) continue;
      engine::ParallelOptions p;
      p.zero = zero;
      test::expect_run_close(train(mesh(2, 1), c, 2, p), ref, 2e-5, 2e-5, what + ", dp 2 zero " + std::to_string(zero));
    }
    test::expect_run_close(train(mesh(1, 2), c, 4), ref, 2e-5, 2e-5, what + ", pp 2");
    if (!kSanitized) test::expect_run_close(train(mesh(2, 2), c, 2), ref, 2e-5, 2e-5, what + ", dp 2 x pp 2");
  });
}

TEST(MoeTrain, ExpertParallelMatchesSingleRankTraining) {
  // Experts split over ep ranks, each routing its own rows of the batch (the tokens go to
  // their experts' ranks and back by all-to-all): ep 2 and 4, ep 2 x dp 2 (DDP: the experts'
  // gradients over dp, the rest over dp x ep), ep 2 x pp 2; top 1 and 2, dropless and with a
  // capacity factor (drops by each rank's own rule, as one rank drops per micro-batch).
  for_each_routing([](const nn::GPTConfig& c, const std::string& what, const test::TrainRun& ref) {
    test::expect_run_close(train(mesh(1, 1, 1, 2), c, 2), ref, 2e-5, 2e-5, what + ", ep 2");
    if (kSanitized) return;
    test::expect_run_close(train(mesh(1, 1, 1, 4), c, 1), ref, 2e-5, 2e-5, what + ", ep 4");
    test::expect_run_close(train(mesh(2, 1, 1, 2), c, 1), ref, 2e-5, 2e-5, what + ", dp 2 x ep 2");
    test::expect_run_close(train(mesh(1, 2, 1, 2), c, 2), ref, 2e-5, 2e-5, what + ", pp 2 x ep 2");
  });
}

TEST(MoeTrain, ExpertParallelWithZeroMatchesSingleRankTraining) {
  // ZeRO over dp beside ep 2: the shared gradients summed over ep, then reduce-scattered
  // over dp; the experts' over dp alone; the norm's expert part over dp x ep.
  for_each_routing([](const nn::GPTConfig& c, const std::string& what, const test::TrainRun& ref) {
    for (int zero : {1, 2, 3}) {
      if (kSanitized && zero != 2) continue;
      engine::ParallelOptions p;
      p.zero = zero;
      test::expect_run_close(train(mesh(2, 1, 1, 2), c, 1, p), ref, 2e-5, 2e-5,
                             what + ", dp 2 x ep 2 zero " + std::to_string(zero));
    }
    if (kSanitized) return;
    engine::ParallelOptions p;
    p.zero = 1;
    test::expect_run_close(train(mesh(2, 2, 1, 2), c, 1, p), ref, 2e-5, 2e-5, what + ", dp 2 x pp 2 x ep 2 zero 1");
  });
}

TEST(MoeTrain, ExpertExchangeDispatchThenCombineReturnsItsInputExactly) {
  // 3 ep ranks, 6 experts (2 each); each rank sends its own counts, some zero (expert 1
  // receives nothing at all).
  auto m = mesh(1, 1, 1, 3);
  m->run([&](int, int r) {
    comm::Communicator& ep = m->comm(r, "ep");
    std::vector<int64_t> tokens = {1 + r, 0, 2, r, 3 - r, 1};
    int64_t S = 0;
    for (int64_t t : tokens) S += t;
    const Tensor xp = test::randn({S, 5}, DType::F32, 40 + static_cast<uint64_t>(r), "xp");
    nn::ExpertExchange ex;
    ex.plan(nn::EpGroup{&ep}, tokens);
    Tensor xr, yp = Tensor::zeros({S, 5}, DType::F32);
    ex.dispatch(xp, xr);
    // Rank r holds experts 2r and 2r + 1: the sum over sources s of their counts.
    const int64_t want = std::vector<int64_t>{6, 9, 9}[static_cast<size_t>(r)];
    EXPECT_EQ(ex.received_rows(), want) << "rank " << r;
    ex.combine(xr, yp);
    EXPECT_TRUE(test::same_bits(yp, xp)) << "rank " << r;
  });
}

TEST(MoeTrain, ExpertParallelRefusalsNameTheOption) {
  auto refused = [](const nn::GPTConfig& c, std::shared_ptr<comm::Mesh> m, const engine::ParallelOptions& p,
                    const std::string& needle) {
    nn::GPT model(c);
    optim::AdamW opt(model.parameters(), test::dp_adamw());
    try {
      engine::Trainer t(std::move(m), model, opt, test::dp_options(1), p);
      ADD_FAILURE() << "accepted; expected an error with \"" << needle << "\"";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  nn::GPTConfig c = config(2, 0.0f);
  c.n_experts = 6;
  refused(c, mesh(1, 1, 1, 4), {}, "GPTConfig.n_experts = 6 does not divide over ep = 4");
  engine::ParallelOptions zero;
  zero.zero = 1;
  refused(config(2, 0.0f), mesh(1, 1, 1, 2), zero, "with expert parallelism (ep = 2) and dp = 1");
  refused(test::tp_tiny_gpt(true, DType::F32), mesh(1, 1, 1, 2), {}, "needs a mixture of experts");
}

TEST(MoeTrain, TensorParallelWithSequenceParallelismMatchesSingleRankTraining) {
  // Under SP each tp rank routes its own token rows (whole sequences here: 2 of a 4-row
  // micro-batch) through whole experts, their gradients summed over tp as the norms' are:
  // one rank running those rows as its micro-batches. tp 2 and ep 2 x tp 2.
  for_each_routing([](const nn::GPTConfig& c, const std::string& what, const test::TrainRun& ref) {
    engine::ParallelOptions sp;
    sp.sequence_parallel = true;
    test::expect_run_close(train(mesh(1, 1, 2), c, 2, sp), ref, 2e-5, 2e-5, what + ", tp 2 + SP");
    if (kSanitized) return;
    test::expect_run_close(train(mesh(1, 1, 2, 2), c, 1, sp), ref, 2e-5, 2e-5, what + ", ep 2 x tp 2 + SP");
  });
}

TEST(MoeTrain, AGatedSharedExpertTrainsLikeOneRankOnEveryLayout) {
  // Qwen2-MoE's block: a shared expert every token goes through, behind a sigmoid gate, held
  // whole on every ep and tp rank like attention (its gradients summed over dp x ep, and over
  // tp under SP); top-2 gates not renormalised; q/k/v biases.
  nn::GPTConfig c = config(2, 0.0f);
  c.moe_shared_d_ff = 24;
  c.moe_shared_gate = true;
  c.moe_renormalize = false;
  c.qkv_bias = true;
  const test::TrainRun ref = train(nullptr, c, 4);
  test::expect_run_close(train(mesh(1, 1, 1, 2), c, 2), ref, 2e-5, 2e-5, "shared expert, ep 2");
  engine::ParallelOptions zero2;
  zero2.zero = 2;
  test::expect_run_close(train(mesh(2, 1, 1, 2), c, 1, zero2), ref, 2e-5, 2e-5, "shared expert, dp 2 x ep 2 zero 2");
  if (kSanitized) return;
  engine::ParallelOptions sp;
  sp.sequence_parallel = true;
  test::expect_run_close(train(mesh(1, 1, 2, 2), c, 1, sp), ref, 2e-5, 2e-5, "shared expert, ep 2 x tp 2 + SP");
  test::expect_run_close(train(mesh(1, 2, 1, 2), c, 2), ref, 2e-5, 2e-5, "shared expert, pp 2 x ep 2");
}

TEST(MoeTrain, ExpertsWithTensorParallelismNeedSequenceParallelism) {
  const nn::GPTConfig c = config(2, 0.0f);
  nn::GPT model(c);
  optim::AdamW opt(model.parameters(), test::dp_adamw());
  try {
    engine::Trainer t(mesh(1, 1, 2), model, opt, test::dp_options(1));
    ADD_FAILURE() << "experts with tp 2 were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("with tp = 2 needs sequence parallelism"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dt

namespace dt {
namespace DT_TEST_NS {

TEST(MoePlan, ExpertsPerRankAndTheAllToAllFormulaMatchTheLayout) {
  // The plan's parameters per ep rank are what an ep rank's part holds; its all-to-all
  // formula is what a uniform router would send (the measured bytes are in --report).
  const nn::GPTConfig c = config(2, 0.0f);
  engine::PlanOptions o;
  o.ep = 2;
  o.micro_batch = 4;
  o.seq_len = 16;
  const nlohmann::json p = engine::plan_json(c, o)["moe"];
  auto m = mesh(1, 1, 1, 2);
  nn::GPT host(c);
  parallel::Layout layout(m, host, {});
  for (int li = 0; li < layout.local_parts(); ++li)
    EXPECT_EQ(static_cast<double>(layout.part(li).num_parameters()), p["params_per_rank"].get<double>());
  // 4 blocks x (counts: 1 peer x 2 experts x 8 bytes + 4 x 64 tokens x top 2 x 1/2 rows x 32 x 4 bytes).
  EXPECT_EQ(p["all_to_all_bytes_per_micro_batch"].get<double>(), 4.0 * (16.0 + 4.0 * 64 * 2 * 0.5 * 32 * 4));
  o.ep = 3;
  test::expect_invalid([&] { engine::plan_json(c, o); }, "n_experts = 4 does not divide over ep = 3");
}

}  // namespace
}  // namespace dt
