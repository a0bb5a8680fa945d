// Tensor parallelism under mpirun: one tp rank per process (tp = the world, and dp 2 x tp 2
// at np 4), the same global batches everywhere. Each process also trains the same model
// alone and compares: the losses and the gathered final weights match single-rank training
// (the in-process tolerances, tests/multirank/tp_train_test.cc), every process ends with
// the same whole weights, a checkpoint saved under mpirun loads on one device, and
// generation on the tp ranks gives the single-rank tokens. Each layout also runs with
// sequence parallelism, and dp 2 x tp 2 with ZeRO-3 inside the tp groups.
#include "engine/generate.h"
#include "mpi/mpi_train_checks.h"

namespace dt::comm::mpitest {
namespace {

const std::vector<std::vector<int32_t>> kPrompts = {{1, 2, 3}, {4, 5, 6, 7, 8}};

std::vector<double> train(std::shared_ptr<Mesh> mesh, std::vector<double>* weights, const std::string& save_to = "",
                          bool sp = false, int zero = 0) {
  nn::GPT model(dt::test::tp_tiny_gpt(false, DType::F32));
  optim::AdamW opt(model.parameters(), dt::test::dp_adamw());
  engine::ParallelOptions par;
  par.sequence_parallel = sp;
  par.zero = zero;
  engine::Trainer t(mesh, model, opt, dt::test::dp_options(1), par);
  std::vector<double> losses;
  for (int s = 0; s < 8; ++s) {
    dt::test::TokenBatch b = dt::test::random_token_batch(8, 16, 32, 60 + s % 2);
    losses.push_back(t.train_step(b.in, b.tg).loss);
  }
  if (mesh && mesh->axis_size(kTp) > 1) {
    // Generation on the tp ranks (the KV cache sharded by heads) gives the tokens of the
    // single-rank model with the same weights (gathered below).
    engine::GenerateOptions g;
    g.max_new_tokens = 5;
    const engine::GenerateResult got = t.generate(kPrompts, g);
    t.gather_model();
    EXPECT_EQ(got.tokens, engine::generate(model, kPrompts, g).tokens) << "generate, rank " << world_rank();
  }
  t.gather_model();  // collective: every process's host model whole again
  if (!save_to.empty()) t.save(save_to);
  *weights = flat_weights(model);
  return losses;
}

TEST_F(MpiTest, TensorParallelMatchesSingleRankTraining) {
  const int n = world_size();
  if (n != 2 && n != 4) GTEST_SKIP() << "needs 2 or 4 processes";
  struct Case {
    Coords axes;
    bool sp;
    int zero;
  };
  std::vector<Case> cases = {{{1, 1, 1, 1, n}, false, 0}, {{1, 1, 1, 1, n}, true, 0}};
  if (n == 4)  // dp 2 x tp 2: DDP, and ZeRO-3 inside the tp groups with SP
    cases.insert(cases.end(), {{{2, 1, 1, 1, 2}, false, 0}, {{2, 1, 1, 1, 2}, true, 3}});
  std::vector<double> ref_w;
  const std::vector<double> ref = train(nullptr, &ref_w);
  for (const Case& k : cases) {
    const Coords& axes = k.axes;
    const std::string what = "dp " + std::to_string(axes[kDp]) + " x tp " + std::to_string(axes[kTp]) +
                             (k.sp ? " sp" : "") + (k.zero ? " zero " + std::to_string(k.zero) : "") + " rank " +
                             std::to_string(world_rank());
    const std::string dir = "/tmp/dtrain_mpi_tp_np" + std::to_string(n) + "_dp" + std::to_string(axes[kDp]);
    std::vector<double> got_w;
    const std::vector<double> got = train(mpi_mesh(axes), &got_w, dir, k.sp, k.zero);
    const nn::GPTConfig c = dt::test::tp_tiny_gpt(false, DType::F32);
    const engine::TrainOptions o = dt::test::dp_options(1);
    expect_trained_like_one_rank(got, ref, got_w, ref_w, 2e-5, what, dir, &c, &o);
  }
}

}  // namespace
}  // namespace dt::comm::mpitest
