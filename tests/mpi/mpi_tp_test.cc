// Tensor parallelism under mpirun: one tp rank per process (tp = the world, and dp 2 x tp 2
// at np 4), the same global batches everywhere. Each process also trains the same model
// alone and compares: the losses and the gathered final weights match single-rank training
// (the in-process tolerances, tests/multirank/tp_train_test.cc), every process ends with
// the same whole weights, a checkpoint saved under mpirun loads on one device, and
// generation on the tp ranks gives the single-rank tokens. Each layout also runs with
// sequence parallelism, and dp 2 x tp 2 with ZeRO-3 inside the tp groups.
#include <cmath>
#include <cstring>
#include <filesystem>

#include "engine/generate.h"
#include "mpi/mpi_test_util.h"
#include "multirank/dp_test_util.h"

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
  for (nn::Parameter* q : model.parameters()) {
    const std::vector<double> v = dt::test::to_f64(q->value);
    weights->insert(weights->end(), v.begin(), v.end());
  }
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
    ASSERT_EQ(ref.size(), got.size());
    for (size_t s = 0; s < ref.size(); ++s) EXPECT_NEAR(got[s], ref[s], 2e-5 * std::abs(ref[s])) << what << " step " << s;
    double d = 0, norm = 0;
    for (size_t i = 0; i < ref_w.size(); ++i) d += (got_w[i] - ref_w[i]) * (got_w[i] - ref_w[i]), norm += ref_w[i] * ref_w[i];
    EXPECT_LE(std::sqrt(d / norm), 2e-5) << what;
    // Every process assembled the same whole weights, bit for bit.
    std::vector<double> root = got_w;
    MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    EXPECT_EQ(std::memcmp(root.data(), got_w.data(), got_w.size() * sizeof(double)), 0) << what;
    // The checkpoint rank 0 wrote loads on one device and holds those weights, bit for bit.
    nn::GPT alone(dt::test::tp_tiny_gpt(false, DType::F32));
    optim::AdamW opt(alone.parameters(), dt::test::dp_adamw());
    engine::TrainEngine e(nullptr, alone, opt, dt::test::dp_options(1));
    e.load(dir);
    EXPECT_EQ(e.step(), 8) << what;
    std::vector<double> loaded;
    for (nn::Parameter* q : alone.parameters()) {
      const std::vector<double> v = dt::test::to_f64(q->value);
      loaded.insert(loaded.end(), v.begin(), v.end());
    }
    EXPECT_EQ(std::memcmp(loaded.data(), got_w.data(), got_w.size() * sizeof(double)), 0) << what;
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace dt::comm::mpitest
