// Cancellation under mpirun: each process has its own flag, and a flag raised in ONE
// process stops the call in every process (the ranks agree with an all-reduce where the
// step's gradients are complete, or before each decode step; a pipeline's last stage
// decides its generation), so nobody updates or generates alone, the mesh stays usable,
// and the next calls agree again. Over dp, tp and pp.
#include "engine/generate.h"
#include "mpi/mpi_train_checks.h"

namespace dt::comm::mpitest {
namespace {

bool cancelled(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DT_ERR_CANCELLED) << e.what();
    return true;
  }
  return false;
}

TEST_F(MpiTest, AFlagRaisedInOneProcessStopsEveryProcess) {
  const int n = world_size();
  for (int axis : {kDp, kTp, kPp}) {
    const std::string what = std::string(axis_name(axis)) + " " + std::to_string(n) + ", rank " +
                             std::to_string(world_rank());
    Coords axes{1, 1, 1, 1, 1};
    axes[axis] = n;
    auto mesh = mpi_mesh(axes);
    nn::GPTConfig cfg = dt::test::tp_tiny_gpt(false, DType::F32);
    cfg.n_layer = 4;  // a block per stage at pp 4
    nn::GPT model(cfg);
    optim::AdamW opt(model.parameters(), dt::test::dp_adamw());
    engine::Trainer t(mesh, model, opt, dt::test::dp_options(1));
    auto flag = std::make_shared<CancelFlag>();
    t.set_cancel(flag);
    const dt::test::TokenBatch b = dt::test::random_token_batch(8, 16, 32, 61);
    t.train_step(b.in, b.tg);
    // The last process raises its flag; every process's step is cancelled.
    if (world_rank() == n - 1) flag->request();
    EXPECT_TRUE(cancelled([&] { t.train_step(b.in, b.tg); })) << what;
    EXPECT_EQ(t.step(), 1) << what;
    // Generation: tp replicas agree before each decode step; over a pipeline the last stage
    // (the raising process here) decides for all; a dp engine generates on each process
    // alone, so there the local flag decides.
    engine::GenerateOptions g;
    g.max_new_tokens = 4;
    const bool gen_cancelled = t.generate({{1, 2, 3}, {4, 5}}, g).cancelled;  // the C API: CANCELLED
    EXPECT_EQ(gen_cancelled, axis != kDp || world_rank() == n - 1) << what;
    flag->reset();
    const double loss = t.train_step(b.in, b.tg).loss;
    EXPECT_EQ(t.step(), 2) << what;
    // Every process took the same step: the losses agree bitwise.
    double lo = loss, hi = loss;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(lo, hi) << what;
  }
}

}  // namespace
}  // namespace dt::comm::mpitest
