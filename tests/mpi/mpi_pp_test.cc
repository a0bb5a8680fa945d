// Pipeline parallelism under mpirun: one rank per process, the stream between stages over
// Open MPI point-to-point. np 2: pp 2 (1F1B, and interleaved with 2 chunks per rank); np 4:
// pp 4 (GPipe) and dp 2 x pp 2 with ZeRO-1; np 8: the seeds' 3-D layout dp 2 x pp 2 x tp 2
// (tp innermost, pp next, dp outermost). Each process also trains the same model alone and
// compares: losses and the gathered final weights match single-rank training to the
// in-process tolerance (tests/multirank/pp_train_test.cc: 2e-5 relative, f32), every
// process assembles the same whole weights, the checkpoint rank 0 wrote loads on one
// device with those weights, and generation over the stages gives the single-rank tokens.
#include "engine/generate.h"
#include "mpi/mpi_train_checks.h"

namespace dt::comm::mpitest {
namespace {

nn::GPTConfig config() {
  nn::GPTConfig c = dt::test::tp_tiny_gpt(false, DType::F32);
  c.n_layer = 8;
  return c;
}

std::vector<double> train(std::shared_ptr<Mesh> mesh, std::vector<double>* weights, const engine::ParallelOptions& par,
                          const std::string& save_to = "") {
  nn::GPT model(config());
  optim::AdamW opt(model.parameters(), dt::test::dp_adamw());
  engine::Trainer t(mesh, model, opt, dt::test::dp_options(4), par);
  std::vector<double> losses;
  for (int s = 0; s < 10; ++s) {
    dt::test::TokenBatch b = dt::test::random_token_batch(8, 16, 32, 80 + s % 3);
    losses.push_back(t.train_step(b.in, b.tg).loss);
  }
  if (mesh && par.virtual_stages == 1) {
    // Generation over the stages (each its layers' KV cache, the prompts in flight
    // together) gives the tokens of the single-rank model with the same weights.
    const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}, {4, 5, 6, 7, 8}, {9}};
    engine::GenerateOptions g;
    g.max_new_tokens = 4;
    const engine::GenerateResult got = t.generate(prompts, g);
    t.gather_model();
    EXPECT_EQ(got.tokens, engine::generate(model, prompts, g).tokens) << "generate, rank " << world_rank();
  }
  t.gather_model();  // collective: every process's host model whole again
  if (!save_to.empty()) t.save(save_to);
  *weights = flat_weights(model);
  return losses;
}

TEST_F(MpiTest, PipelineMatchesSingleRankTraining) {
  const int n = world_size();
  struct Case {
    Coords axes;
    const char* schedule;
    int v, zero;
  };
  std::vector<Case> cases;
  if (n == 2) cases = {{{1, 2, 1, 1, 1}, "1f1b", 1, 0}, {{1, 2, 1, 1, 1}, "interleaved", 2, 0}};
  if (n == 4) cases = {{{1, 4, 1, 1, 1}, "gpipe", 1, 0}, {{2, 2, 1, 1, 1}, "1f1b", 1, 1}};
  if (n == 8) cases = {{{2, 2, 1, 1, 2}, "1f1b", 1, 0}};
  if (cases.empty()) GTEST_SKIP() << "needs 2, 4 or 8 processes";
  std::vector<double> ref_w;
  const std::vector<double> ref = train(nullptr, &ref_w, {});
  for (const Case& k : cases) {
    const Coords& axes = k.axes;
    const std::string what = "dp " + std::to_string(axes[kDp]) + " x pp " + std::to_string(axes[kPp]) + " x tp " +
                             std::to_string(axes[kTp]) + " " + k.schedule + " zero " + std::to_string(k.zero) +
                             " rank " + std::to_string(world_rank());
    const std::string dir = "/tmp/dtrain_mpi_pp_np" + std::to_string(n) + "_" + k.schedule;
    engine::ParallelOptions par;
    par.pp_schedule = k.schedule;
    par.virtual_stages = k.v;
    par.zero = k.zero;
    std::vector<double> got_w;
    const std::vector<double> got = train(mpi_mesh(axes), &got_w, par, dir);
    const nn::GPTConfig c = config();
    const engine::TrainOptions o = dt::test::dp_options(4);
    expect_trained_like_one_rank(got, ref, got_w, ref_w, 2e-5, what, dir, &c, &o);
  }
}

}  // namespace
}  // namespace dt::comm::mpitest
