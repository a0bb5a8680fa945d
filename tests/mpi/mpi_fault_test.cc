// Faults under MPI: a rank that never joins (timeout), abort from another thread, a rank
// whose work throws, mismatched collectives and a short message. Each ends with every
// rank seeing the mesh in its error state, and a new mesh working afterwards.
#include <chrono>
#include <thread>

#include "core/error.h"
#include "mpi/mpi_test_util.h"

namespace dt::comm::mpitest {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Polls check_healthy() until it reports the error a peer sent (a notice may still be in
// flight); returns its code, or DT_OK if none came within `seconds`.
dt_status error_seen(Mesh& mesh, double seconds) {
  auto t0 = Clock::now();
  while (since(t0) < seconds) {
    try {
      mesh.check_healthy();
    } catch (const Error& e) {
      return e.code();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return DT_OK;
}

// The world still works after a failed mesh was destroyed.
void expect_new_mesh_works() {
  auto mesh = mpi_mesh({0, 1, 1, 1, 1}, 30);
  int32_t x = 1;
  mesh->comm(world_rank(), "dp").all_reduce(&x, &x, 1, DType::I32, ReduceOp::Sum);
  EXPECT_EQ(x, world_size());
}

TEST_F(MpiTest, MissingRankTimesOutAndEveryRankSeesTheError) {
  const double timeout = 1.0;
  {
    auto mesh = mpi_mesh({0, 1, 1, 1, 1}, timeout);
    const int me = world_rank();
    auto t0 = Clock::now();
    if (me == 1) {
      // Never joins, but stays alive past the deadline; then learns of the peers' failure.
      std::this_thread::sleep_for(std::chrono::duration<double>(timeout + 1.0));
      EXPECT_EQ(error_seen(*mesh, 5.0), DT_ERR_TIMEOUT);
    } else {
      float x = 1;
      try {
        mesh->comm(me, "dp").all_reduce(&x, &x, 1, DType::F32, ReduceOp::Sum);
        ADD_FAILURE() << "expected a timeout";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), DT_ERR_TIMEOUT) << e.what();
        EXPECT_NE(std::string(e.what()).find("all_reduce on axis dp"), std::string::npos) << e.what();
        // Rank 1 sleeps outside the library: it cannot answer the status check.
        EXPECT_NE(std::string(e.what()).find("rank(s) [1] did not arrive (rank(s) 1 did not answer"), std::string::npos)
            << e.what();
      }
      EXPECT_LT(since(t0), timeout + 2.0);
    }
    // The error state stays, on every rank, for every later call.
    EXPECT_THROW(mesh->check_healthy(), Error);
    float y = 1;
    EXPECT_THROW(mesh->comm(me, "dp").all_reduce(&y, &y, 1, DType::F32, ReduceOp::Sum), Error);
    EXPECT_THROW(mesh->run([](int, int) {}), Error);
  }
  expect_new_mesh_works();
}

// A peer that is alive in the library (polling, so it answers the status check) but never
// calls the collective: the timeout names it and how far it got, and the waiting ranks'
// history shows the call with its sequence number and how it ended.
TEST_F(MpiTest, TimeoutNamesALiveRankThatIsBehindAndHistoryShowsTheCall) {
  const double timeout = 1.0;
  {
    auto mesh = mpi_mesh({0, 1, 1, 1, 1}, timeout);
    const int me = world_rank();
    if (me == 1) {
      EXPECT_EQ(error_seen(*mesh, timeout + 10), DT_ERR_TIMEOUT);  // polls: answers status checks
    } else {
      int32_t x = 1;
      try {
        mesh->comm(me, "dp").all_reduce(&x, &x, 1, DType::I32, ReduceOp::Sum);
        ADD_FAILURE() << "expected a timeout";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), DT_ERR_TIMEOUT) << e.what();
        EXPECT_NE(std::string(e.what()).find("(seq 1 on rank "), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("rank(s) [1] did not arrive (rank 1 last called seq 0"),
                  std::string::npos)
            << e.what();
      }
      const std::string h = mesh->history_json(me);
      EXPECT_NE(h.find("{\"seq\":1,\"kind\":\"all_reduce\",\"axis\":\"dp\",\"bytes\":4,"), std::string::npos) << h;
      EXPECT_NE(h.find("\"status\":\"timeout\""), std::string::npos) << h;
    }
  }
  expect_new_mesh_works();
}

TEST_F(MpiTest, AbortFromAnotherThreadEndsEveryRanksWait) {
  {
    auto mesh = mpi_mesh({0, 1, 1, 1, 1}, 30);
    const int me = world_rank();
    auto t0 = Clock::now();
    std::thread aborter;
    try {
      if (me == 0) {
        aborter = std::thread([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          mesh->abort("test abort");
        });
        float x = 0;
        mesh->comm(me, "dp").recv(&x, 1, DType::F32, 1, 7);  // rank 1 never sends
      } else {
        mesh->comm(me, "dp").barrier();  // rank 0 never joins
      }
      ADD_FAILURE() << "expected DT_ERR_ABORTED";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), DT_ERR_ABORTED) << e.what();
      EXPECT_NE(std::string(e.what()).find("test abort"), std::string::npos) << e.what();
    }
    if (aborter.joinable()) aborter.join();
    EXPECT_LT(since(t0), 5.0);  // far below the 30 s timeout
    EXPECT_THROW(mesh->check_healthy(), Error);
  }
  expect_new_mesh_works();
}

TEST_F(MpiTest, RankWhoseWorkThrowsAbortsItsPeers) {
  {
    auto mesh = mpi_mesh({0, 1, 1, 1, 1}, 30);
    auto t0 = Clock::now();
    try {
      mesh->run([&](int, int rank) {
        if (rank == 1) throw std::runtime_error("boom");
        mesh->comm(rank, "dp").barrier();
      });
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {  // the peers: aborted by rank 1's notice
      EXPECT_NE(world_rank(), 1);
      EXPECT_EQ(e.code(), DT_ERR_ABORTED) << e.what();
      EXPECT_NE(std::string(e.what()).find("boom"), std::string::npos) << e.what();
    } catch (const std::runtime_error& e) {  // rank 1: its own exception
      EXPECT_EQ(world_rank(), 1);
    }
    EXPECT_LT(since(t0), 5.0);
  }
  expect_new_mesh_works();
}

TEST_F(MpiTest, MismatchedCollectivesFailOnEveryRank) {
  const int me = world_rank(), n = world_size();
  {
    auto mesh = mpi_mesh({0, 1, 1, 1, 1}, 30);
    std::vector<float> x(6, 1.0f);
    try {
      mesh->comm(me, "dp").all_reduce(x.data(), x.data(), me == 0 ? 5 : 6, DType::F32, ReduceOp::Sum);
      ADD_FAILURE() << "expected DT_ERR_COMM";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), DT_ERR_COMM) << e.what();
      EXPECT_NE(std::string(e.what()).find("mismatched collectives"), std::string::npos) << e.what();
    }
  }
  {
    auto mesh = mpi_mesh({0, 1, 1, 1, 1}, 30);
    std::vector<int64_t> sc(n, 1), rc(n, 1), send(n + 1), recv(n + 1);
    if (me == 0) rc[n - 1] = 2;  // rank n-1 sends it only 1
    try {
      mesh->comm(me, "dp").all_to_all(send.data(), sc, recv.data(), rc, DType::I64);
      ADD_FAILURE() << "expected DT_ERR_COMM";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), DT_ERR_COMM) << e.what();
      EXPECT_NE(std::string(e.what()).find("which expects 2"), std::string::npos) << e.what();
    }
  }
  auto unchecked = mpi_mesh({0, 1, 1, 1, 1}, 30, /*check_args=*/false);
  int64_t y = me;
  unchecked->comm(me, "dp").all_reduce(&y, &y, 1, DType::I64, ReduceOp::Max);
  EXPECT_EQ(y, n - 1);
}

TEST_F(MpiTest, ShortMessageIsACommError) {
  const int me = world_rank();
  {
    auto mesh = mpi_mesh({0, 1, 1, 1, 1}, 30);
    std::vector<float> x(7, 1.0f);
    if (me == 0) mesh->comm(me, "dp").send(x.data(), 5, DType::F32, 1, 9);
    if (me == 1) {
      try {
        mesh->comm(me, "dp").recv(x.data(), 7, DType::F32, 0, 9);
        ADD_FAILURE() << "expected DT_ERR_COMM";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), DT_ERR_COMM) << e.what();
        EXPECT_NE(std::string(e.what()).find("rank 0 sent 5 f32 elements (tag 9); rank 1 expected 7"),
                  std::string::npos)
            << e.what();
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);  // rank 1 has failed and sent its notice
    EXPECT_EQ(error_seen(*mesh, 5.0), DT_ERR_COMM);
  }
  expect_new_mesh_works();
}

}  // namespace
}  // namespace dt::comm::mpitest
