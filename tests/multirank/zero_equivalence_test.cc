// ZeRO stages 1-3 (engine::Trainer with ParallelOptions::zero on the local backend) against
// single-rank training on the same global batches: zero {1, 2, 3} x dp {1, 2, 4} x
// micro-batches {1, 2} x {f32, bf16}, 10 AdamW steps with clipping each. Also: the per-rank
// memory ledger equals the ZeRO paper's formulas to the byte, ZeRO-3's peak parameter
// memory stays within its shards plus two gathered blocks, the wire bytes per step are
// DDP's for stages 1/2 and 1.5x for stage 3, an overflow on one
// rank makes every rank skip, and a ZeRO checkpoint loads into any layout.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/allocator.h"
#include "multirank/coll_util.h"
#include "multirank/dp_test_util.h"

namespace dt {
namespace DT_TEST_NS {

nn::GPTConfig tiny(DType dtype) { return test::dp_tiny_gpt(dtype); }
engine::TrainOptions options(int64_t micro) { return test::dp_options(micro); }
optim::AdamWOptions adam() { return test::dp_adamw(); }
using test::rel_dist;
using test::values_of;

constexpr int kSteps = 10;
constexpr int64_t kB = 8, kT = 16;

test::TokenBatch batch(int s) {
  test::TokenBatch b = test::random_token_batch(kB, kT, 32, 100 + s % 2);  // two batches, learnable
  b.tg.data<int32_t>()[3] = -1;  // an ignored target, so ranks hold different counts
  return b;
}

struct TrainRun {
  std::vector<double> losses;
  std::vector<std::vector<double>> params;
};

TrainRun train(std::shared_ptr<comm::Mesh> mesh, DType dtype, int64_t micro, int zero, int steps = kSteps) {
  nn::GPT model(tiny(dtype));
  optim::AdamW opt(model.parameters(), adam());
  engine::ParallelOptions p;
  p.zero = zero;
  engine::Trainer t(mesh, model, opt, options(micro), p);
  TrainRun r;
  for (int s = 0; s < steps; ++s) r.losses.push_back(t.train_step(batch(s).in, batch(s).tg).loss);
  t.gather_model();  // stage 3: the values exist whole only while they are used
  r.params = values_of(model);
  for (int i = 1; i < t.local_replicas(); ++i) EXPECT_EQ(values_of(t.model(i)), r.params) << "replica " << i;
  return r;
}

TEST(ZeRO, EveryStageMatchesSingleRankTraining) {
  for (DType dtype : {DType::F32, DType::BF16})
    for (int64_t micro : {1, 2}) {
      const TrainRun ref = train(nullptr, dtype, micro, 0);
      for (int zero : {1, 2, 3})
        for (int dp : {1, 2, 4}) {
          const TrainRun got = train(comm::test::world_mesh(dp), dtype, micro, zero);
          // The same bounds as DDP's (ddp_equivalence_test.cc): f32 sums grouped by rank
          // (and the squared norm summed over shards), bf16 rounding each rank's partial
          // sum and carrying it in bf16 weights.
          const double loss_tol = dtype == DType::F32 ? 1e-5 : 2e-3, param_tol = dtype == DType::F32 ? 1e-4 : 2e-2;
          const double worst = test::worst_rel_loss(got.losses, ref.losses);
          const double dist = rel_dist(got.params, ref.params);
          std::printf("%s micro %lld zero %d dp %d: worst step loss rel diff %.2e, param rel dist %.2e\n",
                      dtype_name(dtype), static_cast<long long>(micro), zero, dp, worst, dist);
          EXPECT_LE(worst, loss_tol) << dtype_name(dtype) << " micro " << micro << " zero " << zero << " dp " << dp;
          EXPECT_LE(dist, param_tol) << dtype_name(dtype) << " micro " << micro << " zero " << zero << " dp " << dp;
          EXPECT_LT(got.losses.back(), got.losses.front());
        }
    }
}

TEST(ZeRO, SameLayoutSameSeedIsBitwise) {
  const TrainRun a = train(comm::test::world_mesh(2), DType::F32, 2, 3), b = train(comm::test::world_mesh(2), DType::F32, 2, 3);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.params, b.params);
}

// Per-rank bytes of a tag, from the rank's own ledger.
int64_t rank_bytes(int rank, MemTag tag, bool peak = false) {
  const Ledger* l = rank_ledger(Device::cpu(), rank);
  if (!l) return 0;
  return peak ? l->peak(static_cast<int32_t>(tag)) : l->current(static_cast<int32_t>(tag));
}

TEST(ZeRO, TheRankLedgerEqualsThePaperFormulasAtEveryStage) {
  for (DType dtype : {DType::F32, DType::BF16})
    for (int zero : {0, 1, 2, 3}) {
      const int n = 4;
      auto mesh = comm::test::world_mesh(n);
      nn::GPT model(tiny(dtype));
      const double psi = 1600 + 2 * 12704;
      optim::AdamW opt(model.parameters(), adam());
      engine::ParallelOptions p;
      p.zero = zero;
      engine::Trainer t(mesh, model, opt, options(1), p);
      t.train_step(batch(0).in, batch(0).tg);
      // Bytes per parameter: weights w, grads w, optimizer K (f32: Adam's two moments;
      // bf16: + the f32 master), as in the paper's (2 + 2 + K) psi with K = 12.
      const double w = dtype == DType::F32 ? 4 : 2, k = dtype == DType::F32 ? 8 : 12;
      const double params = zero >= 3 ? w * psi / n : w * psi;
      const double grads = zero >= 2 ? w * psi / n : w * psi;
      const double optimizer = zero >= 1 ? k * psi / n : k * psi;
      for (int r = 0; r < n; ++r) {
        // Each optimizer also holds an 8-byte step counter; rank 0 keeps the host's too
        // (its state was released to the shards, its counter stays) when zero > 0.
        const int64_t counters = 8 * ((zero > 0 && r == 0) ? 2 : 1);
        EXPECT_EQ(rank_bytes(r, MemTag::Param), static_cast<int64_t>(params)) << dtype_name(dtype) << " zero " << zero << " rank " << r;
        EXPECT_EQ(rank_bytes(r, MemTag::Grad), static_cast<int64_t>(grads)) << dtype_name(dtype) << " zero " << zero << " rank " << r;
        EXPECT_EQ(rank_bytes(r, MemTag::Optimizer), static_cast<int64_t>(optimizer) + counters)
            << dtype_name(dtype) << " zero " << zero << " rank " << r;
      }
    }
}

TEST(ZeRO, Stage3PeakParameterMemoryIsTheShardsPlusTwoBlocks) {
  const int n = 2;
  auto mesh = comm::test::world_mesh(n);
  nn::GPTConfig cfg = tiny(DType::F32);
  cfg.n_layer = 4;
  nn::GPT model(cfg);
  optim::AdamW opt(model.parameters(), adam());
  engine::ParallelOptions p;
  p.zero = 3;
  engine::Trainer t(mesh, model, opt, options(2), p);
  reset_peaks(Device::cpu());
  for (int s = 0; s < 2; ++s) t.train_step(batch(s).in, batch(s).tg);
  const int64_t block = 12704 * 4, rest = 1600 * 4, shards = (rest + 4 * block) / n;
  for (int r = 0; r < n; ++r) {
    const int64_t peak = rank_bytes(r, MemTag::Param, true);
    std::printf("rank %d: param peak %lld B = shards %lld + %.3f blocks\n", r, static_cast<long long>(peak),
                static_cast<long long>(shards), static_cast<double>(peak - shards) / block);
    EXPECT_LE(peak, shards + 2 * block) << "rank " << r;
    EXPECT_GT(peak, shards + block) << "rank " << r;  // a block and its prefetched neighbour
    EXPECT_EQ(rank_bytes(r, MemTag::Param), shards) << "rank " << r << ": gathered blocks left behind";
    // Grads: the shards, plus at most the non-block grads (alive through backward) and two
    // blocks' while they reduce.
    EXPECT_LE(rank_bytes(r, MemTag::Grad, true), shards + rest + 2 * block) << "rank " << r;
  }
}

// Wire bytes on dp for one step, per rank (comm_ledger.h).
int64_t wire_per_step(int zero, int dp) {
  auto mesh = comm::test::world_mesh(dp);
  nn::GPT model(tiny(DType::F32));
  optim::AdamW opt(model.parameters(), adam());
  engine::ParallelOptions p;
  p.zero = zero;
  engine::Trainer t(mesh, model, opt, options(1), p);
  t.train_step(batch(0).in, batch(0).tg);
  comm::Communicator* c = mesh->find_comm(0, "dp");
  int64_t sum = 0;
  for (int k = 0; k < comm::kNumCollKinds; ++k) sum += c->ledger().get(static_cast<comm::CollKind>(k)).wire_bytes;
  return sum;
}

TEST(ZeRO, WireBytesPerStepAreDDPsForStages1And2AndAbout1Point5xForStage3) {
  for (int dp : {2, 4}) {
    const double ddp = static_cast<double>(wire_per_step(0, dp));
    const double z1 = static_cast<double>(wire_per_step(1, dp)) / ddp, z2 = static_cast<double>(wire_per_step(2, dp)) / ddp,
                 z3 = static_cast<double>(wire_per_step(3, dp)) / ddp;
    std::printf("dp %d: wire bytes per step vs DDP: zero-1 %.3f, zero-2 %.3f, zero-3 %.3f\n", dp, z1, z2, z3);
    // Stages 1/2: reduce-scatter + all-gather = DDP's all-reduce (the paper's 2 psi); only
    // the few floats of loss and norm differ. Stage 3: + one more gather of every unit in
    // backward (3 psi).
    EXPECT_NEAR(z1, 1.0, 0.01);
    EXPECT_NEAR(z2, 1.0, 0.01);
    EXPECT_NEAR(z3, 1.5, 0.01);
  }
}

TEST(ZeRO, AnOverflowOnOneRankSkipsTheStepOnEveryRank) {
  for (int zero : {1, 2, 3}) {
    auto mesh = comm::test::world_mesh(2);
    nn::GPT model(tiny(DType::F16));
    optim::AdamW opt(model.parameters(), adam());
    engine::TrainOptions o = options(1);
    o.loss_scaler.init_scale = 1024.0f;
    engine::ParallelOptions p;
    p.zero = zero;
    engine::Trainer t(mesh, model, opt, o, p);
    t.train_step(batch(0).in, batch(0).tg);
    t.gather_model();
    std::vector<std::vector<double>> before[2] = {values_of(t.model(0)), values_of(t.model(1))};
    std::vector<std::vector<double>> state_before = {};
    for (auto& [name, ten] : t.replica(1).optimizer().state()) state_before.push_back(test::to_f64(ten));
    bool planted = false;  // rank 1 alone finds an Inf in a gradient of its last block
    t.replica(1).set_grad_ready_hook([&](const nn::ParamList& ready) {
      if (planted) return;
      kernels::fill(ready[0]->grad, INFINITY);
      planted = true;
    });
    engine::StepStats s = t.train_step(batch(0).in, batch(0).tg);
    EXPECT_TRUE(s.skipped) << "zero " << zero;
    t.gather_model();
    for (int i : {0, 1}) {
      EXPECT_EQ(t.replica(i).step(), 1) << "zero " << zero << " replica " << i;
      EXPECT_EQ(t.replica(i).loss_scaler()->scale(), 512.0f) << "zero " << zero << " replica " << i;
      EXPECT_EQ(values_of(t.model(i)), before[i]) << "zero " << zero << " replica " << i << " changed on a skipped step";
    }
    std::vector<std::vector<double>> state_after;
    for (auto& [name, ten] : t.replica(1).optimizer().state()) state_after.push_back(test::to_f64(ten));
    EXPECT_EQ(state_after, state_before) << "zero " << zero << ": optimizer state changed on a skipped step";
  }
}

TEST(ZeRO, ACheckpointResumesBitwiseAndLoadsIntoAnyLayout) {
  const std::string dir = (std::filesystem::temp_directory_path() / "dtrain_zero_ckpt").string();
  std::filesystem::remove_all(dir);
  const TrainRun straight = train(comm::test::world_mesh(2), DType::BF16, 1, 3, 6);
  std::vector<std::vector<double>> saved;
  {
    nn::GPT model(tiny(DType::BF16));
    optim::AdamW opt(model.parameters(), adam());
    engine::ParallelOptions p;
    p.zero = 3;
    engine::Trainer t(comm::test::world_mesh(2), model, opt, options(1), p);
    for (int s = 0; s < 3; ++s) t.train_step(batch(s).in, batch(s).tg);
    t.save(dir);
    t.gather_model();
    saved = values_of(model);
    // The state in memory has the single-rank names too (gathered over dp).
    nn::GPT one(tiny(DType::BF16));
    optim::AdamW one_opt(one.parameters(), adam());
    engine::Trainer single(nullptr, one, one_opt, options(1));
    std::vector<std::string> want, got;
    for (auto& ct : single.state_tensors()) want.push_back(ct.name);
    for (auto& ct : t.state_tensors()) got.push_back(ct.name);
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want);
  }
  // The same layout: 3 + 3 steps equal 6 straight, bitwise.
  {
    nn::GPT model(tiny(DType::BF16));
    optim::AdamW opt(model.parameters(), adam());
    engine::ParallelOptions p;
    p.zero = 3;
    engine::Trainer t(comm::test::world_mesh(2), model, opt, options(1), p);
    t.load(dir);
    EXPECT_EQ(t.step(), 3);
    for (int s = 3; s < 6; ++s) t.train_step(batch(s).in, batch(s).tg);
    t.gather_model();
    EXPECT_EQ(values_of(model), straight.params);
  }
  // Other layouts: one device, DDP over 4, ZeRO-1 over 4: the same values and steps.
  for (int layout = 0; layout < 3; ++layout) {
    nn::GPT model(tiny(DType::BF16));
    optim::AdamW opt(model.parameters(), adam());
    engine::ParallelOptions p;
    p.zero = layout == 2 ? 1 : 0;
    engine::Trainer t(layout == 0 ? nullptr : comm::test::world_mesh(4), model, opt, options(1), p);
    t.load(dir);
    EXPECT_EQ(values_of(model), saved) << "layout " << layout;
    EXPECT_EQ(t.step(), 3);
    const double loss = t.train_step(batch(3).in, batch(3).tg).loss;
    EXPECT_NEAR(loss, straight.losses[3], 2e-3 * straight.losses[3]) << "layout " << layout;
  }
  std::filesystem::remove_all(dir);
}

TEST(ZeRO, BadStagesAreNamedErrorsBeforeAnyWork) {
  nn::GPT model(tiny(DType::F32));
  optim::AdamW opt(model.parameters(), adam());
  for (int bad : {-1, 4}) {
    engine::ParallelOptions p;
    p.zero = bad;
    test::expect_invalid([&] { engine::Trainer t(comm::test::world_mesh(2), model, opt, options(1), p); },
                         "option \"zero\" = " + std::to_string(bad) + "; accepted: 0 (DDP, the default), 1, 2 or 3");
  }
  EXPECT_FALSE(opt.released());  // nothing was touched
}

}  // namespace
}  // namespace dt
