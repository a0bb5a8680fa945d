// Pipeline-parallel training (engine::Trainer on a mesh with pp > 1, local backend) against
// single-rank training on the same global batches (DESIGN §4): pp {2, 4} x every schedule
// (GPipe, 1F1B, interleaved 1F1B with 2 chunks per rank, ZB-H1's split backward) x micro-batches {P, 2P}
// x {f32, bf16}; PP x DP with DDP and ZeRO-1/2; PP x TP; the 3-D layout dp 2 x tp 2 x pp 2;
// uneven and explicit stage placements; tied and untied heads; 10 AdamW steps with clipping
// and a warmup-cosine schedule. A pipeline computes each micro-batch's ops exactly as one
// rank does, so runs differ only where gradients are summed in another order: the tied
// token table, whose head and embedding shares are accumulated on different ranks and then
// added (an untied model matches single-rank training bitwise, f32 and bf16). Tolerances:
// 2e-5 relative for f32 (loss per step, gradient norms, final parameters); bf16 2e-2 for
// losses and parameters and 5e-2 for gradient norms (the tied table's bf16 gradient, summed
// in another order, moves the norm by up to 3% on this tiny model). Also: the executor
// runs exactly the schedule's actions in order; the measured per-stage activation peak
// equals the simulator's; a checkpoint written under pp loads on one rank and into another
// pp size; and what a pipeline cannot run is refused by name before any work.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "multirank/coll_util.h"
#include "multirank/dp_test_util.h"
#include "parallel/pipeline_strategy.h"


namespace dt {
namespace DT_TEST_NS {

constexpr int kSteps = 10;
constexpr int64_t kB = 8, kT = 16;

using test::kSanitized;  // sanitizer builds: a thinner matrix (every path, fewer repeats)

nn::GPTConfig config(DType dtype, bool llama = false, int layers = 8) {
  nn::GPTConfig c = test::tp_tiny_gpt(llama, dtype);
  c.n_layer = layers;
  return c;
}

test::TokenBatch batch(int s, int64_t vocab = 32) {
  test::TokenBatch b = test::random_token_batch(kB, kT, vocab, 300 + s % 3);
  b.tg.data<int32_t>()[5] = -1;  // an ignored target
  return b;
}

struct TrainRun : test::TrainRun {
  std::vector<std::vector<parallel::PipeAction>> executed;  // per local replica, the last step's
  std::vector<int> peaks;                                    // the last step's, per stage
};

engine::ParallelOptions pipe(const std::string& schedule, int v = 1, int zero = 0) {
  engine::ParallelOptions p;
  p.pp_schedule = schedule;
  p.virtual_stages = v;
  p.zero = zero;
  return p;
}

TrainRun train(std::shared_ptr<comm::Mesh> mesh, const nn::GPTConfig& c, int64_t micro,
               const engine::ParallelOptions& par = {}, double max_norm = 1.0) {
  engine::TrainOptions o = test::dp_options(micro);
  o.max_grad_norm = max_norm;
  TrainRun r;
  static_cast<test::TrainRun&>(r) = test::train_layout(
      std::move(mesh), c, o, par, kSteps, [&](int s) { return batch(s, c.vocab_size); },
      [&](const engine::StepStats& st, engine::Trainer& t) {
        r.peaks = st.pipeline.stage_activation_peak;
        r.executed.clear();
        for (int i = 0; i < t.local_replicas(); ++i) r.executed.push_back(t.replica(i).executed_actions());
      });
  return r;
}

// The bf16 gradient norm's own tolerance: see the top of this file.
void expect_close(const test::TrainRun& got, const test::TrainRun& ref, double tol, const std::string& what) {
  test::expect_run_close(got, ref, tol, tol < 1e-3 ? tol : 5e-2, what);
}

std::shared_ptr<comm::Mesh> mesh(int dp, int pp, int tp = 1) { return comm::test::axes_mesh({dp, pp, 1, 1, tp}); }

double tol(DType d) { return d == DType::F32 ? 2e-5 : 2e-2; }

TEST(PpTrain, EveryScheduleMatchesSingleRankTraining) {
  const std::vector<DType> dtypes = kSanitized ? std::vector<DType>{DType::F32} : std::vector<DType>{DType::F32, DType::BF16};
  for (DType dtype : dtypes)
    for (int P : {2, 4})
      for (int64_t M : {int64_t{P}, int64_t{2 * P}}) {
        if (kSanitized && (M != P || P == 4)) continue;  // pp 4 runs below, and in the Release pass
        const nn::GPTConfig c = config(dtype);
        const TrainRun ref = train(nullptr, c, M);
        for (auto [name, v] : {std::pair{"gpipe", 1}, std::pair{"1f1b", 1}, std::pair{"interleaved", 2},
                               std::pair{"zb-h1", 1}}) {
          const std::string what = std::string(dtype_name(dtype)) + " pp " + std::to_string(P) + " M " +
                                   std::to_string(M) + " " + name;
          const TrainRun got = train(mesh(1, P), c, M, pipe(name, v));
          expect_close(got, ref, tol(dtype), what);
          // The executor ran the schedule's actions, in its order, on every stage; and the
          // live activations it measured are the simulator's.
          const parallel::PipeSchedule s = parallel::make_pipe_schedule(name, P, static_cast<int>(M), v);
          const parallel::PipeSimulation sim = parallel::simulate(s);
          ASSERT_EQ(got.executed.size(), static_cast<size_t>(P));
          for (int r = 0; r < P; ++r) EXPECT_EQ(got.executed[static_cast<size_t>(r)], s.actions[static_cast<size_t>(r)]) << what;
          EXPECT_EQ(got.peaks, sim.activation_peak) << what;
        }
      }
}

TEST(PpTrain, SplitBackwardWithDataAndTensorParallelism) {
  // ZB-H1's weight passes run after later micro-batches' input passes; DDP and ZeRO-1 over
  // dp, and TP inside the stages, see each unit's gradients final at its weight pass.
  const nn::GPTConfig c = config(DType::F32);
  const TrainRun ref = train(nullptr, c, 4);
  for (int zero : {0, 1})
    expect_close(train(mesh(2, 2), c, 2, pipe("zb-h1", 1, zero)), ref, 2e-5, "zb-h1 dp 2 x pp 2 zero " + std::to_string(zero));
  expect_close(train(mesh(1, 2, 2), c, 4, pipe("zb-h1")), ref, 2e-5, "zb-h1 pp 2 x tp 2");
}

TEST(PpTrain, UntiedModelIsBitwiseSingleRankTraining) {
  // Llama style (untied head): no gradient is summed across ranks, and each stage runs the
  // single-rank ops on the same micro-batches: losses and parameters match bitwise (without
  // clipping: the norm itself, its squares summed stage by stage and then over pp, differs
  // by ~3e-8 relative, and so could the clipping coefficient by an ulp).
  for (DType dtype : {DType::F32, DType::BF16}) {
    if (kSanitized && dtype != DType::F32) continue;
    const nn::GPTConfig c = config(dtype, true);
    const TrainRun ref = train(nullptr, c, 4, {}, 0.0);
    for (auto [P, name, v] : {std::tuple{2, "1f1b", 1}, std::tuple{4, "gpipe", 1}, std::tuple{2, "interleaved", 2},
                              std::tuple{4, "zb-h1", 1}}) {
      const TrainRun got = train(mesh(1, P), c, 4, pipe(name, v), 0.0);
      EXPECT_EQ(got.losses, ref.losses) << dtype_name(dtype) << " pp " << P << " " << name;
      EXPECT_LT(test::worst_rel_loss(got.norms, ref.norms), 1e-6) << dtype_name(dtype) << " pp " << P << " " << name;
      EXPECT_EQ(test::rel_dist(got.params, ref.params), 0.0) << dtype_name(dtype) << " pp " << P << " " << name;
    }
  }
}

TEST(PpTrain, DataParallelBesidePipelineMatchesSingleRankTraining) {
  // dp 2 x pp 2: DDP, ZeRO-1 and ZeRO-2 over dp inside each stage (ZeRO-2 reduces every
  // micro-batch's fresh gradients: the tied table's last-stage share then goes to the first
  // stage every micro-batch too). GPT-2 style (tied) and llama style.
  for (bool llama : {false, true})
    for (int zero : {0, 1, 2})
      for (auto [name, v] : {std::pair{"1f1b", 1}, std::pair{"interleaved", 2}}) {
        if (kSanitized && (llama || v > 1)) continue;
        const nn::GPTConfig c = config(DType::F32, llama);
        const TrainRun ref = train(nullptr, c, 4);
        expect_close(train(mesh(2, 2), c, 2, pipe(name, v, zero)), ref, 2e-5,
                     std::string(llama ? "llama" : "gpt2") + " dp 2 x pp 2 zero " + std::to_string(zero) + " " + name);
      }
}

TEST(PpTrain, TensorParallelInsideStagesMatchesSingleRankTraining) {
  // pp 2 x tp 2 (with and without sequence parallelism), and the seeds' 8-rank layout
  // dp 2 x pp 2 x tp 2 (tp innermost, pp next, dp outermost) with DDP and ZeRO-1.
  for (bool llama : {false, true}) {
    if (kSanitized && llama) continue;
    const nn::GPTConfig c = config(DType::F32, llama);
    const TrainRun ref = train(nullptr, c, 4);
    for (bool seq : {false, true}) {
      engine::ParallelOptions p = pipe("1f1b");
      p.sequence_parallel = seq;
      expect_close(train(mesh(1, 2, 2), c, 4, p), ref, 2e-5,
                   std::string(llama ? "llama" : "gpt2") + " pp 2 x tp 2" + (seq ? " sp" : ""));
    }
    for (int zero : {0, 1}) {
      if (kSanitized && zero == 0) continue;  // the 3-D layout once (DDP runs in the Release pass)
      engine::ParallelOptions p = pipe("1f1b", 1, zero);
      p.sequence_parallel = zero == 1;
      expect_close(train(mesh(2, 2, 2), c, 2, p), ref, 2e-5,
                   std::string(llama ? "llama" : "gpt2") + " dp 2 x pp 2 x tp 2 zero " + std::to_string(zero) +
                       (p.sequence_parallel ? " sp" : ""));
    }
  }
}

TEST(PpTrain, UnevenStagesMatchSingleRankTraining) {
  // 8 blocks over 3 stages (balanced: uneven), explicit placements 1 + 7 and 5 + 3, and
  // interleaving with unequal chunks; with clipping in every step (the norm sums over pp).
  const nn::GPTConfig c = config(DType::F32);
  const TrainRun ref = train(nullptr, c, 4, {}, 0.05);
  ASSERT_GT(ref.norms[0], 0.5);
  expect_close(train(mesh(1, 3), c, 4, pipe("1f1b"), 0.05), ref, 2e-5, "pp 3 balanced, clipped");
  for (std::vector<int> blocks : {std::vector<int>{1, 7}, std::vector<int>{5, 3}}) {
    if (kSanitized && blocks[0] == 1) continue;
    engine::ParallelOptions p = pipe("gpipe");
    p.pp_blocks = blocks;
    expect_close(train(mesh(1, 2), c, 4, p, 0.05), ref, 2e-5,
                 "pp 2 blocks " + std::to_string(blocks[0]) + "," + std::to_string(blocks[1]) + ", clipped");
  }
  engine::ParallelOptions p = pipe("interleaved", 2);
  p.pp_blocks = {1, 3, 2, 2};
  expect_close(train(mesh(1, 2), c, 4, p, 0.05), ref, 2e-5, "pp 2 interleaved blocks 1,3,2,2, clipped");
}

TEST(PpTrain, EvaluateAndF16LossScalingMatchSingleRank) {
  const nn::GPTConfig c = config(DType::F32);
  nn::GPT m1(c), m2(c);
  optim::AdamW o1(m1.parameters(), test::dp_adamw()), o2(m2.parameters(), test::dp_adamw());
  engine::Trainer one(nullptr, m1, o1, test::dp_options(2));
  engine::Trainer two(mesh(1, 2), m2, o2, test::dp_options(2), pipe("interleaved", 2));
  const test::TokenBatch b = batch(0);
  EXPECT_NEAR(two.evaluate(b.in, b.tg), one.evaluate(b.in, b.tg), 1e-6);
  // f16: the overflow check reads the global norm, summed over pp: every stage skips or
  // steps together.
  const nn::GPTConfig h = config(DType::F16);
  expect_close(train(mesh(1, 2), h, 2, pipe("1f1b")), train(nullptr, h, 2), 2e-2, "f16 pp 2 1f1b");
}

// Trains half the steps on `a`, saves, loads into a fresh model on `b`, trains the rest:
// the whole run must match single-rank training of every step.
TrainRun resumed(std::shared_ptr<comm::Mesh> a, const engine::ParallelOptions& pa, std::shared_ptr<comm::Mesh> b,
                 const engine::ParallelOptions& pb, const std::string& dir) {
  const nn::GPTConfig c = config(DType::F32);
  TrainRun r;
  {
    nn::GPT model(c);
    optim::AdamW opt(model.parameters(), test::dp_adamw());
    engine::Trainer t(a, model, opt, test::dp_options(2), pa);
    for (int s = 0; s < kSteps / 2; ++s) r.losses.push_back(t.train_step(batch(s).in, batch(s).tg).loss);
    t.save(dir);
  }
  nn::GPT model(c);
  optim::AdamW opt(model.parameters(), test::dp_adamw());
  engine::Trainer t(b, model, opt, test::dp_options(2), pb);
  t.load(dir);
  EXPECT_EQ(t.step(), kSteps / 2);
  for (int s = kSteps / 2; s < kSteps; ++s) r.losses.push_back(t.train_step(batch(s).in, batch(s).tg).loss);
  t.gather_model();
  r.params = test::values_of(model);
  return r;
}

TEST(PpTrain, CheckpointsMoveBetweenPipelineSizes) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("dtrain_pp_ckpt." + std::to_string(::getpid()))).string();
  const TrainRun ref = train(nullptr, config(DType::F32), 2);
  struct Case {
    std::shared_ptr<comm::Mesh> a;
    engine::ParallelOptions pa;
    std::shared_ptr<comm::Mesh> b;
    engine::ParallelOptions pb;
    const char* what;
  };
  const Case cases[] = {{mesh(1, 2), pipe("1f1b"), nullptr, {}, "pp 2 -> one rank"},
                        {mesh(1, 2), pipe("gpipe"), mesh(1, 4), pipe("1f1b"), "pp 2 -> pp 4"},
                        {nullptr, {}, mesh(1, 2), pipe("interleaved", 2), "one rank -> pp 2 interleaved"},
                        {mesh(2, 2, 2), pipe("1f1b", 1, 1), mesh(1, 2, 2), pipe("1f1b"), "dp2 x pp2 x tp2 zero 1 -> pp2 x tp2"}};
  for (const Case& k : cases) {
    if (kSanitized && (&k == &cases[1] || &k == &cases[2])) continue;  // the first and the 3-D one
    const TrainRun got = resumed(k.a, k.pa, k.b, k.pb, dir);
    EXPECT_LT(test::worst_rel_loss(got.losses, ref.losses), 2e-5) << k.what;
    EXPECT_LT(test::rel_dist(got.params, ref.params), 2e-5) << k.what;
  }
  std::filesystem::remove_all(dir);
}

TEST(PpTrain, AFailingStageEndsTheStepWithoutAHang) {
  // The last stage fails in its last backward, while the first waits to receive the
  // gradient it will never send: the mesh fails, the wait ends, and the step reports the
  // stage's own error.
  nn::GPT model(config(DType::F32));
  optim::AdamW opt(model.parameters(), test::dp_adamw());
  engine::Trainer t(mesh(1, 2), model, opt, test::dp_options(2), pipe("1f1b"));
  t.replica(1).set_grad_ready_hook([](const nn::ParamList&) { fail(DT_ERR_INTERNAL, "stage 1 failed on purpose"); });
  try {
    t.train_step(batch(0).in, batch(0).tg);
    ADD_FAILURE() << "the step did not fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stage 1 failed on purpose"), std::string::npos) << e.what();
  }
}

TEST(PpTrain, WhatCannotRunIsRefusedBeforeAnyWork) {
  nn::GPTConfig c = config(DType::F32);
  c.n_layer = 2;
  nn::GPT model(c);
  optim::AdamW opt(model.parameters(), test::dp_adamw());
  const std::vector<std::vector<double>> before = test::values_of(model);
  test::expect_invalid([&] { engine::Trainer t(mesh(1, 4), model, opt, test::dp_options(4), pipe("1f1b")); },
                       "4 stages, more than the model's 2 blocks");
  test::expect_invalid([&] { engine::Trainer t(mesh(1, 2), model, opt, test::dp_options(4), pipe("interleaved", 2)); },
                       "more than the model's 2 blocks");
  test::expect_invalid([&] { engine::Trainer t(mesh(1, 2), model, opt, test::dp_options(3), pipe("interleaved", 1)); },
                       "interleaved");
  test::expect_invalid([&] { engine::Trainer t(mesh(1, 2), model, opt, test::dp_options(2), pipe("pipedream")); },
                       "option \"pp_schedule\" = \"pipedream\"; accepted: gpipe, 1f1b, interleaved, zb-h1");
  test::expect_invalid([&] { engine::Trainer t(mesh(2, 2), model, opt, test::dp_options(2), pipe("zb-h1", 1, 2)); },
                       "which ZeRO-2's per-micro-batch reduction cannot follow");
  test::expect_invalid([&] { engine::Trainer t(mesh(2, 2), model, opt, test::dp_options(2), pipe("1f1b", 1, 3)); },
                       "zero = 3 with pipeline parallelism");
  engine::ParallelOptions blocks = pipe("1f1b");
  blocks.pp_blocks = {1, 2};
  test::expect_invalid([&] { engine::Trainer t(mesh(1, 2), model, opt, test::dp_options(2), blocks); }, "sum");
  // Nothing was lost: the model is untouched and still trains.
  EXPECT_EQ(test::values_of(model), before);
  engine::Trainer t(mesh(1, 2), model, opt, test::dp_options(2), pipe("1f1b"));
  EXPECT_TRUE(std::isfinite(t.train_step(batch(0).in, batch(0).tg).loss));
}

}  // namespace
}  // namespace dt
