// Tensor-parallel training (engine::Trainer on a mesh with tp > 1, local backend) against
// single-rank training on the same global batches: GPT-2 style over tp {2, 4} and dp x tp
// 2 x 2 (DDP over dp beside TP), llama style (GQA) over tp 2, micro-batches {1, 2}, f32 and
// bf16; 10 AdamW steps with clipping and a warmup-cosine schedule. Tolerances: the
// all-reduces sum partial products in another order than one matmul, and Adam divides by
// small second moments, so f32 runs agree to 2e-5 relative (loss per step, and the final
// parameters as a whole) and bf16 runs to 2e-2. Also: the clipping norm counts replicated
// parameters once (a run whose every step clips still matches); checkpoints stay in the
// single-rank layout and resume in any other (tp 2 -> 1, 1 -> tp 4, dp2 x tp2 -> tp 4,
// tp 4 -> dp2 x tp2, and from and into ZeRO inside tp groups) on the single-rank
// trajectory; and heads that do not split are refused by name. f16 with loss scaling and
// activation checkpointing also match. Every layout also runs with Megatron sequence parallelism
// (ParallelOptions::sequence_parallel), and dp 2 x tp 2 with ZeRO-1/2/3 over dp inside each
// tp group, GPT-2 and llama style, to the same tolerances. Llama style at tp 4 has fewer KV
// heads (2) than ranks: each is held by 2 ranks and its gradients summed over them. And a
// split model keeps no whole copy of the optimizer state beside its parts' slices.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/allocator.h"
#include "multirank/coll_util.h"
#include "multirank/dp_test_util.h"

namespace dt {
namespace DT_TEST_NS {

constexpr int kSteps = 10;

// Sanitizer builds run a thinner matrix (test::kSanitized): every code path (each layout,
// SP, each ZeRO stage) with fewer repeats of the same paths in other dtypes and
// micro-batch counts, which the Release pass runs in full.
using test::kSanitized;
const std::vector<DType> kDtypes =
    kSanitized ? std::vector<DType>{DType::F32} : std::vector<DType>{DType::F32, DType::BF16};
const std::vector<int64_t> kMicros = kSanitized ? std::vector<int64_t>{2} : std::vector<int64_t>{1, 2};
const std::vector<bool> kStyles = kSanitized ? std::vector<bool>{true} : std::vector<bool>{false, true};
constexpr int64_t kB = 8, kT = 16;

nn::GPTConfig config(bool llama, DType dtype) { return test::tp_tiny_gpt(llama, dtype); }

test::TokenBatch batch(int s, int64_t vocab = 32) {
  test::TokenBatch b = test::random_token_batch(kB, kT, vocab, 200 + s % 2);
  b.tg.data<int32_t>()[5] = -1;  // an ignored target
  return b;
}

using test::TrainRun;

engine::ParallelOptions sp(bool on, int zero = 0) {
  engine::ParallelOptions p;
  p.sequence_parallel = on;
  p.zero = zero;
  return p;
}
std::string sp_name(bool on) { return on ? " sp" : ""; }

TrainRun train(std::shared_ptr<comm::Mesh> mesh, const nn::GPTConfig& c, int64_t micro, double max_norm,
               const engine::ParallelOptions& par = {}) {
  engine::TrainOptions o = test::dp_options(micro);
  o.max_grad_norm = max_norm;
  return test::train_layout(std::move(mesh), c, o, par, kSteps, [&](int s) { return batch(s, c.vocab_size); });
}

void expect_close(const TrainRun& got, const TrainRun& ref, double tol, const std::string& what) {
  test::expect_run_close(got, ref, tol, tol, what);
}

TEST(TpTrain, Gpt2StyleMatchesSingleRankTraining) {
  for (DType dtype : kDtypes)
    for (int64_t micro : kMicros) {
      const nn::GPTConfig c = config(false, dtype);
      const TrainRun ref = train(nullptr, c, micro, 1.0);
      const double tol = dtype == DType::F32 ? 2e-5 : 2e-2;
      for (bool seq : {false, true})
        for (auto [dp, tp] : {std::pair{1, 2}, std::pair{1, 4}, std::pair{2, 2}}) {
          const std::string what = std::string(dtype_name(dtype)) + " micro " + std::to_string(micro) + " dp " +
                                   std::to_string(dp) + " tp " + std::to_string(tp) + sp_name(seq);
          expect_close(train(comm::test::axes_mesh({dp, 1, 1, 1, tp}), c, micro, 1.0, sp(seq)), ref, tol, what);
        }
    }
}

TEST(TpTrain, ZeroInsideTpGroupsMatchesSingleRankTraining) {
  // dp 2 x tp 2: ZeRO-1/2/3 over dp within each tp group, with and without SP, gradient
  // accumulation on (stages 2/3 reduce each micro-batch's fresh gradients, so SP's partial
  // norm gradients are summed every micro-batch there).
  for (DType dtype : kDtypes)
    for (bool llama : kStyles) {  // sanitized: llama (GQA, SwiGLU, RMSNorm) alone
      const nn::GPTConfig c = config(llama, dtype);
      const TrainRun ref = train(nullptr, c, 2, 1.0);
      for (int zero : {1, 2, 3})
        for (bool seq : {false, true}) {
          const std::string what = std::string(llama ? "llama " : "gpt2 ") + dtype_name(dtype) + " dp 2 x tp 2 zero " +
                                   std::to_string(zero) + sp_name(seq);
          expect_close(train(comm::test::axes_mesh({2, 1, 1, 1, 2}), c, 2, 1.0, sp(seq, zero)), ref,
                       dtype == DType::F32 ? 2e-5 : 2e-2, what);
        }
    }
}

TEST(TpTrain, LlamaStyleWithGqaMatchesSingleRankTraining) {
  for (DType dtype : kDtypes) {
    const nn::GPTConfig c = config(true, dtype);
    const TrainRun ref = train(nullptr, c, 2, 1.0);
    for (bool seq : {false, true})
      for (int tp : {2, 4})  // tp 4: 2 KV heads, each held by 2 ranks
        expect_close(train(comm::test::axes_mesh({1, 1, 1, 1, tp}), c, 2, 1.0, sp(seq)), ref,
                     dtype == DType::F32 ? 2e-5 : 2e-2,
                     std::string("llama ") + dtype_name(dtype) + " tp " + std::to_string(tp) + sp_name(seq));
  }
  // With ZeRO over dp 2 beside it (8 ranks): the norm weighs the replicated KV rows of each
  // shard by 1/2.
  const nn::GPTConfig c = config(true, DType::F32);
  const TrainRun ref = train(nullptr, c, 1, 0.05);
  for (int zero : {0, 1, 3})
    expect_close(train(comm::test::axes_mesh({2, 1, 1, 1, 4}), c, 1, 0.05, sp(true, zero)), ref, 2e-5,
                 "llama clipped dp 2 x tp 4 sp zero " + std::to_string(zero));
}

TEST(TpTrain, PaddedVocabularyMatchesSingleRankTraining) {
  // 30 ids over tp 4 (the last part 6 ids and 2 padding rows), untied head too (llama):
  // the padding never reaches the loss, an update, or the gathered weights.
  for (bool llama : {false, true}) {
    nn::GPTConfig c = config(llama, DType::F32);
    c.vocab_size = 30;
    const TrainRun ref = train(nullptr, c, 1, 1.0);
    const int tp = llama ? 2 : 4;
    for (bool seq : {false, true})
      expect_close(train(comm::test::axes_mesh({1, 1, 1, 1, tp}), c, 1, 1.0, sp(seq)), ref, 2e-5,
                   std::string(llama ? "llama" : "gpt2") + " vocab 30 tp " + std::to_string(tp) + sp_name(seq));
  }
}

TEST(TpTrain, F16LossScalingAndActivationCheckpointingMatchSingleRankTraining) {
  // f16 with dynamic loss scaling: the overflow check reads the global norm, the same on
  // every tp rank, so every rank skips or steps together. And activation checkpointing:
  // backward recomputes each block's forward, collectives included.
  nn::GPTConfig h = config(false, DType::F16);
  const TrainRun ref16 = train(nullptr, h, 2, 1.0);
  for (bool seq : {false, true})
    expect_close(train(comm::test::axes_mesh({1, 1, 1, 1, 2}), h, 2, 1.0, sp(seq)), ref16, 2e-2,
                 "f16 tp 2" + sp_name(seq));
  for (bool llama : {false, true}) {
    nn::GPTConfig c = config(llama, DType::F32);
    c.checkpoint = true;
    const TrainRun ref = train(nullptr, c, 2, 1.0);
    for (bool seq : {false, true})
      expect_close(train(comm::test::axes_mesh({2, 1, 1, 1, 2}), c, 2, 1.0, sp(seq, seq ? 3 : 0)), ref, 2e-5,
                   std::string(llama ? "llama" : "gpt2") + " checkpointed dp 2 x tp 2" + sp_name(seq) +
                       (seq ? " zero 3" : ""));
  }
}

TEST(TpTrain, ClippingCountsReplicatedParametersOnce) {
  // A max norm far below the gradient norm: every step clips, so a norm that counted the
  // replicated parameters (embeddings, norms) tp times would scale every update differently.
  const nn::GPTConfig c = config(false, DType::F32);
  const TrainRun ref = train(nullptr, c, 1, 0.05);
  ASSERT_GT(ref.norms[0], 0.5);
  for (bool seq : {false, true})
    expect_close(train(comm::test::axes_mesh({1, 1, 1, 1, 4}), c, 1, 0.05, sp(seq)), ref, 2e-5,
                 "clipped tp 4" + sp_name(seq));
  // Under ZeRO the norm is summed from the dp shards, each split into tp parts and
  // replicated elements.
  for (int zero : {1, 3})
    expect_close(train(comm::test::axes_mesh({2, 1, 1, 1, 2}), c, 1, 0.05, sp(true, zero)), ref, 2e-5,
                 "clipped dp 2 x tp 2 sp zero " + std::to_string(zero));
}

// Trains `first` steps on `mesh_a`, saves, loads into a fresh model on `mesh_b`, trains
// the rest there: the whole run must match single-rank training of every step.
TrainRun resumed(std::shared_ptr<comm::Mesh> mesh_a, std::shared_ptr<comm::Mesh> mesh_b, const std::string& dir,
                 bool sp_a = false, int zero_a = 0, int zero_b = 0) {
  const nn::GPTConfig c = config(false, DType::F32);
  TrainRun r;
  {
    nn::GPT model(c);
    optim::AdamW opt(model.parameters(), test::dp_adamw());
    engine::Trainer t(mesh_a, model, opt, test::dp_options(1), sp(sp_a, zero_a));
    for (int s = 0; s < kSteps / 2; ++s) r.losses.push_back(t.train_step(batch(s).in, batch(s).tg).loss);
    t.save(dir);
  }
  nn::GPT model(c);
  optim::AdamW opt(model.parameters(), test::dp_adamw());
  engine::Trainer t(mesh_b, model, opt, test::dp_options(1), sp(false, zero_b));
  t.load(dir);
  EXPECT_EQ(t.step(), kSteps / 2);
  for (int s = kSteps / 2; s < kSteps; ++s) r.losses.push_back(t.train_step(batch(s).in, batch(s).tg).loss);
  t.gather_model();
  r.params = test::values_of(model);
  return r;
}

TEST(TpTrain, CheckpointsLoadIntoAnyLayout) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("dtrain_tp_ckpt." + std::to_string(::getpid()))).string();
  const TrainRun ref = train(nullptr, config(false, DType::F32), 1, 1.0);
  auto layout = [](int dp, int tp) { return dp * tp == 1 ? nullptr : comm::test::axes_mesh({dp, 1, 1, 1, tp}); };
  struct Case {
    int dp_a, tp_a, dp_b, tp_b;
    bool sp_a;
    int zero_a, zero_b;
  };
  const Case cases[] = {{1, 2, 1, 1, true, 0, 0}, {1, 1, 1, 4, false, 0, 0}, {2, 2, 1, 4, true, 0, 0},
                        {1, 4, 2, 2, false, 0, 0}, {2, 2, 1, 2, true, 3, 0}, {1, 2, 2, 2, false, 0, 2}};
  for (const Case& k : cases) {
    const TrainRun got = resumed(layout(k.dp_a, k.tp_a), layout(k.dp_b, k.tp_b), dir, k.sp_a, k.zero_a, k.zero_b);
    auto zero = [](int z) { return z > 0 ? " zero " + std::to_string(z) : std::string(); };
    const std::string what = "dp" + std::to_string(k.dp_a) + " x tp" + std::to_string(k.tp_a) + sp_name(k.sp_a) +
                             zero(k.zero_a) + " -> dp" + std::to_string(k.dp_b) + " x tp" + std::to_string(k.tp_b) +
                             zero(k.zero_b);
    EXPECT_LT(test::worst_rel_loss(got.losses, ref.losses), 2e-5) << what;
    EXPECT_LT(test::rel_dist(got.params, ref.params), 2e-5) << what;
  }
  std::filesystem::remove_all(dir);
}

// A split model's parts hold their slices of the optimizer state and nothing more: the
// host's whole state (what the user's optimizer was built with) is released once cut into
// the parts, so rank 0 holds what rank 1 does plus the host's 8-byte step counter, before
// and after a step and after a gather of the whole state (state_tensors, which hands out the
// whole moments and releases them again). Under pp 2 rank 0 holds less than the whole.
TEST(TpTrain, TheHostsWholeOptimizerStateIsReleased) {
  auto opt_bytes = [](int rank) {
    const Ledger* l = rank_ledger(Device::cpu(), rank);
    return l ? l->current(static_cast<int32_t>(MemTag::Optimizer)) : int64_t{0};
  };
  for (DType dtype : {DType::F32, DType::BF16}) {
    const nn::GPTConfig c = config(true, dtype);
    nn::GPT model(c);
    optim::AdamW opt(model.parameters(), test::dp_adamw());
    const int64_t whole = (dtype == DType::F32 ? 8 : 12) * model.num_parameters();
    engine::Trainer t(comm::test::axes_mesh({1, 1, 1, 1, 2}), model, opt, test::dp_options(2), {});
    const std::string what = std::string("tp 2 ") + dtype_name(dtype);
    EXPECT_EQ(opt_bytes(0), opt_bytes(1) + 8) << what << ": after construction";
    EXPECT_LT(opt_bytes(0), whole) << what;
    t.train_step(batch(0).in, batch(0).tg);
    EXPECT_EQ(opt_bytes(0), opt_bytes(1) + 8) << what << ": after a step";
    int64_t moments = 0;
    for (auto& st : t.state_tensors())
      if (st.name.find(".exp_avg") != std::string::npos) moments += static_cast<int64_t>(st.tensor.nbytes());
    EXPECT_EQ(moments, 8 * model.num_parameters()) << what << ": the gathered moments are whole";
    EXPECT_EQ(opt_bytes(0), opt_bytes(1) + 8) << what << ": after the gather, released again";
    t.train_step(batch(1).in, batch(1).tg);
  }
  nn::GPT model(config(true, DType::F32));
  optim::AdamW opt(model.parameters(), test::dp_adamw());
  engine::Trainer t(comm::test::axes_mesh({1, 2, 1, 1, 1}), model, opt, test::dp_options(2), {});
  EXPECT_LT(opt_bytes(0), 8 * model.num_parameters()) << "pp 2: rank 0 holds its stage's state only";
}

TEST(TpTrain, WhatIsNotBuiltIsNamed) {
  nn::GPT model(config(false, DType::F32));
  optim::AdamW opt(model.parameters(), test::dp_adamw());
  nn::GPTConfig three = config(false, DType::F32);
  three.n_head = 2;  // 2 heads over tp 4
  nn::GPT m3(three);
  optim::AdamW o3(m3.parameters(), test::dp_adamw());
  test::expect_invalid([&] { engine::Trainer t3(comm::test::axes_mesh({1, 1, 1, 1, 4}), m3, o3, test::dp_options(1)); },
                       "n_head = 2 does not split over tp = 4");
  // Sequence parallelism without tp, and a batch whose tokens do not split over tp.
  test::expect_invalid([&] { engine::Trainer t(comm::test::axes_mesh({2, 1, 1, 1, 1}), model, opt, test::dp_options(1), sp(true)); },
                       "sequence_parallel needs tensor parallelism: the mesh's tp axis is 1");
  engine::Trainer t(comm::test::axes_mesh({1, 1, 1, 1, 2}), model, opt, test::dp_options(1), sp(true));
  const test::TokenBatch odd = test::random_token_batch(1, 3, 32, 7);
  test::expect_invalid([&] { t.train_step(odd.in, odd.tg); }, "train_step: sequence parallel: 3 tokens (batch x sequence, 1 x 3 per micro-batch) do not split over tp = 2");
  // Nothing was lost: the trainer still trains.
  EXPECT_TRUE(std::isfinite(t.train_step(batch(0).in, batch(0).tg).loss));
}

}  // namespace
}  // namespace dt
