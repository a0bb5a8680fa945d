// A mixture of experts under mpirun: one rank per process, the experts' all-to-all and the
// gradients' all-reduces over Open MPI. np 2: ep 2 and dp 2; np 4: ep 4, dp 2 x ep 2 and
// pp 2 x ep 2. Each process also trains the same model alone, with the micro-batches each
// layout's ranks run (the auxiliary losses are per micro-batch), and compares (np 4 also
// dp 2 x ep 2 with ZeRO-2): losses and
// the gathered final weights within 2e-5 relative (tests/multirank/moe_train_test.cc's
// tolerance), every process holding the same bits, and the checkpoint rank 0 wrote loading
// on one device with them; generation on the layout gives the single-rank tokens.
// Context parallelism rides in this program (one MPI executable fewer to build in three CI
// passes): ring attention's K/V and their gradients over Open MPI's point-to-point, np 2:
// cp 2; np 4: cp 4 and dp 2 x cp 2, against the same model trained alone, with its checkpoint.
#include "engine/generate.h"
#include "mpi/mpi_train_checks.h"

namespace dt::comm::mpitest {
namespace {

nn::GPTConfig config() {
  nn::GPTConfig c = dt::test::tp_tiny_gpt(true, DType::F32);
  c.n_layer = 4;
  c.n_experts = 4;
  c.d_ff = 48;
  c.top_k = 2;
  return c;
}

constexpr int64_t kMicro = 4;  // one rank's micro-batches of the batch of 8

std::vector<double> train(std::shared_ptr<Mesh> mesh, int ranks_splitting_batch, std::vector<double>* weights,
                          const std::string& save_to = "", int zero = 0) {
  nn::GPT model(config());
  optim::AdamW opt(model.parameters(), dt::test::dp_adamw());
  engine::ParallelOptions par;
  par.zero = zero;
  engine::Trainer t(mesh, model, opt, dt::test::dp_options(kMicro / ranks_splitting_batch), par);
  std::vector<double> losses;
  for (int s = 0; s < 10; ++s) {
    dt::test::TokenBatch b = dt::test::random_token_batch(8, 16, 32, 90 + s % 3);
    losses.push_back(t.train_step(b.in, b.tg).loss);
  }
  if (mesh) {  // every replica generates, its tokens through the experts' ranks
    const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}, {4, 5, 6, 7, 8}};
    engine::GenerateOptions g;
    g.max_new_tokens = 4;
    const engine::GenerateResult got = t.generate(prompts, g);
    t.gather_model();
    EXPECT_EQ(got.tokens, engine::generate(model, prompts, g).tokens) << "generate, rank " << world_rank();
  }
  t.gather_model();
  if (!save_to.empty()) t.save(save_to);
  *weights = flat_weights(model);
  return losses;
}

TEST_F(MpiTest, MixtureOfExpertsMatchesSingleRankTraining) {
  const int n = world_size();
  std::vector<Coords> cases;  // {dp, pp, ep, cp, tp}
  if (n == 2) cases = {{1, 1, 2, 1, 1}, {2, 1, 1, 1, 1}};
  if (n == 4) cases = {{1, 1, 4, 1, 1}, {2, 1, 2, 1, 1}, {1, 2, 2, 1, 1}, {2, 1, 2, 1, 1}};
  if (cases.empty()) GTEST_SKIP() << "needs 2 or 4 processes";
  std::vector<double> ref_w;
  const std::vector<double> ref = train(nullptr, 1, &ref_w);
  for (size_t k = 0; k < cases.size(); ++k) {
    const Coords& axes = cases[k];
    const int zero = n == 4 && k == 3 ? 2 : 0;  // the last np 4 case: dp 2 x ep 2 with ZeRO-2
    const std::string what = "dp " + std::to_string(axes[kDp]) + " x pp " + std::to_string(axes[kPp]) + " x ep " +
                             std::to_string(axes[kEp]) + " zero " + std::to_string(zero) + " rank " +
                             std::to_string(world_rank());
    const std::string dir = "/tmp/dtrain_mpi_moe_np" + std::to_string(n) + "_" + std::to_string(axes[kEp]) + "_" +
                            std::to_string(axes[kPp]) + "_" + std::to_string(zero);
    std::vector<double> got_w;
    const std::vector<double> got = train(mpi_mesh(axes), axes[kDp] * axes[kEp], &got_w, dir, zero);
    const nn::GPTConfig c = config();
    const engine::TrainOptions o = dt::test::dp_options(kMicro);
    expect_trained_like_one_rank(got, ref, got_w, ref_w, 2e-5, what, dir, &c, &o);
  }
}

std::vector<double> train_dense(std::shared_ptr<Mesh> mesh, std::vector<double>* weights, const std::string& save_to) {
  nn::GPTConfig c = dt::test::tp_tiny_gpt(true, DType::F32);
  c.context = 32;
  nn::GPT model(c);
  optim::AdamW opt(model.parameters(), dt::test::dp_adamw());
  engine::Trainer t(mesh, model, opt, dt::test::dp_options(1));
  std::vector<double> losses;
  for (int s = 0; s < 10; ++s) {
    dt::test::TokenBatch b = dt::test::random_token_batch(4, 32, 32, 70 + s % 3);
    losses.push_back(t.train_step(b.in, b.tg).loss);
  }
  t.gather_model();
  if (!save_to.empty()) t.save(save_to);
  *weights = flat_weights(model);
  return losses;
}

TEST_F(MpiTest, ContextParallelMatchesSingleRankTraining) {
  const int n = world_size();
  std::vector<Coords> cases;  // {dp, pp, ep, cp, tp}
  if (n == 2) cases = {{1, 1, 1, 2, 1}};
  if (n == 4) cases = {{1, 1, 1, 4, 1}, {2, 1, 1, 2, 1}};
  if (cases.empty()) GTEST_SKIP() << "needs 2 or 4 processes";
  std::vector<double> ref_w;
  const std::vector<double> ref = train_dense(nullptr, &ref_w, "");
  for (const Coords& axes : cases) {
    const std::string what = "dp " + std::to_string(axes[kDp]) + " x cp " + std::to_string(axes[kCp]) + " rank " +
                             std::to_string(world_rank());
    const std::string dir = "/tmp/dtrain_mpi_cp_np" + std::to_string(n) + "_" + std::to_string(axes[kCp]);
    std::vector<double> got_w;
    const std::vector<double> got = train_dense(mpi_mesh(axes), &got_w, dir);
    nn::GPTConfig c = dt::test::tp_tiny_gpt(true, DType::F32);
    c.context = 32;
    const engine::TrainOptions o = dt::test::dp_options(1);
    expect_trained_like_one_rank(got, ref, got_w, ref_w, 2e-5, what, dir, &c, &o);
  }
}

}  // namespace
}  // namespace dt::comm::mpitest
