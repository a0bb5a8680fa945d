// DDP and ZeRO under mpirun: one replica per process, the same global batches everywhere.
// Each process also trains the same model alone (no mesh) and compares: the losses and final
// weights match single-rank training, and every process ends with the same weights.
#include <cmath>
#include <cstring>
#include <filesystem>

#include "multirank/dp_test_util.h"
#include "mpi/mpi_test_util.h"
#include "unit/test_util.h"

namespace dt::comm::mpitest {
namespace {

nn::GPTConfig tiny(DType dtype) { return dt::test::dp_tiny_gpt(dtype, 9); }

std::vector<double> train(std::shared_ptr<Mesh> mesh, DType dtype, int64_t micro, int zero, std::vector<double>* weights) {
  nn::GPT model(tiny(dtype));
  optim::AdamW opt(model.parameters(), dt::test::dp_adamw());
  engine::TrainOptions o;
  o.micro_batches = micro;
  o.max_grad_norm = 1.0;
  engine::ParallelOptions p;
  p.bucket_bytes = 4096;
  p.zero = zero;
  engine::Trainer t(mesh, model, opt, o, p);
  std::vector<double> losses;
  for (int s = 0; s < 8; ++s) {
    dt::test::TokenBatch b = dt::test::random_token_batch(8, 16, 32, 40 + s % 2);
    losses.push_back(t.train_step(b.in, b.tg).loss);
  }
  t.gather_model();  // ZeRO-3: the blocks' values whole again (collective)
  for (nn::Parameter* q : model.parameters()) {
    const std::vector<double> v = dt::test::to_f64(q->value);
    weights->insert(weights->end(), v.begin(), v.end());
  }
  return losses;
}

// DDP and every ZeRO stage, f32 with and without accumulation, bf16 for DDP and ZeRO-3:
// the losses and weights of single-rank training, and the same weights on every process.
TEST_F(MpiTest, DdpAndZeroMatchSingleRankTraining) {
  const int n = world_size();
  if (8 % (2 * n) != 0) GTEST_SKIP() << "needs a world size dividing 4";
  struct Case {
    DType dtype;
    int64_t micro;
    int zero;
  };
  std::vector<Case> cases;
  for (int zero : {0, 1, 2, 3})
    for (int64_t micro : {1, 2}) cases.push_back({DType::F32, micro, zero});
  cases.push_back({DType::BF16, 2, 0});
  cases.push_back({DType::BF16, 2, 3});
  for (const Case& c : cases) {
    const std::string what = std::string(dtype_name(c.dtype)) + " micro " + std::to_string(c.micro) + " zero " +
                             std::to_string(c.zero) + " rank " + std::to_string(world_rank());
    std::vector<double> ref_w, got_w;
    const std::vector<double> ref = train(nullptr, c.dtype, c.micro, 0, &ref_w);
    const std::vector<double> got = train(mpi_mesh(), c.dtype, c.micro, c.zero, &got_w);
    ASSERT_EQ(ref.size(), got.size());
    // The tolerances of the in-process tests (ddp/zero_equivalence_test.cc).
    const double loss_tol = c.dtype == DType::F32 ? 1e-5 : 2e-3, param_tol = c.dtype == DType::F32 ? 1e-4 : 2e-2;
    for (size_t s = 0; s < ref.size(); ++s) EXPECT_NEAR(got[s], ref[s], loss_tol * std::abs(ref[s])) << what << " step " << s;
    double d = 0, norm = 0;
    for (size_t i = 0; i < ref_w.size(); ++i) d += (got_w[i] - ref_w[i]) * (got_w[i] - ref_w[i]), norm += ref_w[i] * ref_w[i];
    EXPECT_LE(std::sqrt(d / norm), param_tol) << what;
    // Every process holds the same weights, bit for bit (rank 0's, broadcast, compared).
    std::vector<double> root = got_w;
    MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    EXPECT_EQ(std::memcmp(root.data(), got_w.data(), got_w.size() * sizeof(double)), 0) << what;
  }
}

// A ZeRO-3 checkpoint under mpirun: rank 0 writes the gathered state while the others wait;
// every process then loads it into one device and finds the weights it trained, bit for bit.
TEST_F(MpiTest, Zero3CheckpointSavedUnderMpirunLoadsOnOneDevice) {
  const int n = world_size();
  if (8 % (2 * n) != 0) GTEST_SKIP() << "needs a world size dividing 4";
  const std::string dir = "/tmp/dtrain_mpi_zero3_np" + std::to_string(n);
  std::vector<double> trained;
  {
    nn::GPT model(tiny(DType::BF16));
    optim::AdamW opt(model.parameters(), optim::AdamWOptions{});
    engine::ParallelOptions p;
    p.zero = 3;
    engine::Trainer t(mpi_mesh(), model, opt, engine::TrainOptions{}, p);
    for (int s = 0; s < 3; ++s) {
      dt::test::TokenBatch b = dt::test::random_token_batch(8, 16, 32, 60 + s);
      t.train_step(b.in, b.tg);
    }
    t.save(dir);  // collective: every rank gathers, rank 0 writes, all wait
    t.gather_model();
    for (nn::Parameter* q : model.parameters()) {
      const std::vector<double> v = dt::test::to_f64(q->value);
      trained.insert(trained.end(), v.begin(), v.end());
    }
  }
  nn::GPT one(tiny(DType::BF16));
  optim::AdamW opt(one.parameters(), optim::AdamWOptions{});
  engine::Trainer single(nullptr, one, opt, engine::TrainOptions{});
  single.load(dir);
  EXPECT_EQ(single.step(), 3);
  std::vector<double> loaded;
  for (nn::Parameter* q : one.parameters()) {
    const std::vector<double> v = dt::test::to_f64(q->value);
    loaded.insert(loaded.end(), v.begin(), v.end());
  }
  EXPECT_EQ(loaded, trained) << "rank " << world_rank();
  MPI_Barrier(MPI_COMM_WORLD);  // everyone has read it before rank 0 cleans up
  if (world_rank() == 0) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dt::comm::mpitest
