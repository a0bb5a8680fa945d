// Faults on the local backend: a missing rank times out (naming the collective, the axis
// and who is missing), an abort from another thread ends every wait, a rank that throws or
// returns early fails its peers at once (an error, not a timeout), and a failed mesh stays
// failed while a new one works.
//
// The bounds on elapsed time are hang detectors, far above what the mechanism needs; where
// "quickly" matters, the timeout is set to a minute, so the code (not the clock) shows that
// the peers did not simply wait it out.
#include <atomic>

#include "multirank/coll_util.h"

namespace dt::comm::test {
namespace DT_TEST_NS {

constexpr double kShort = 0.5;  // timeout for the tests that expect one
constexpr double kLong = 60;    // timeout for the tests that must end without one

TEST(Timeout, MissingRankIsNamedWithTheCollectiveAndAxis) {
  auto mesh = world_mesh(3, kShort);
  auto out = run_outcomes(*mesh, [&](int rank) {
    if (rank == 2) return idle_until_failed(*mesh);
    float x[4] = {};
    mesh->comm(rank, "world").all_reduce(x, x, 4, DType::F32, ReduceOp::Sum);
  });
  for (int r : {0, 1}) {
    EXPECT_EQ(out[r].code, DT_ERR_TIMEOUT) << out[r].what;
    EXPECT_TRUE(contains(out[r].what, "all_reduce on axis world")) << out[r].what;
    EXPECT_TRUE(contains(out[r].what, "rank(s) [2] did not arrive")) << out[r].what;
    EXPECT_LT(out[r].seconds, kShort + 2);
  }
}

TEST(Timeout, OnASubAxisNamesThatAxisAndGlobalRanks) {
  auto mesh = axes_mesh({2, 1, 1, 1, 2}, kShort);  // tp groups {0,1} and {2,3}
  auto out = run_outcomes(*mesh, [&](int rank) {
    if (rank == 3) return idle_until_failed(*mesh);
    int32_t x = rank;
    mesh->comm(rank, "tp").broadcast(&x, &x, 1, DType::I32, 1);
  });
  EXPECT_EQ(out[0].code, DT_OK);  // group {0,1} was complete
  EXPECT_EQ(out[2].code, DT_ERR_TIMEOUT) << out[2].what;
  EXPECT_TRUE(contains(out[2].what, "broadcast on axis tp")) << out[2].what;
  EXPECT_TRUE(contains(out[2].what, "[3]")) << out[2].what;
}

TEST(Timeout, SeveralMissingRanksInABarrier) {
  auto mesh = world_mesh(4, kShort);
  auto out = run_outcomes(*mesh, [&](int rank) {
    if (rank >= 2) return idle_until_failed(*mesh);
    mesh->comm(rank, "world").barrier();
  });
  EXPECT_EQ(out[0].code, DT_ERR_TIMEOUT) << out[0].what;
  EXPECT_TRUE(contains(out[0].what, "barrier on axis world")) << out[0].what;
  EXPECT_TRUE(contains(out[0].what, "[2, 3]")) << out[0].what;
}

TEST(Timeout, RecvFromAPeerThatNeverSends) {
  auto mesh = world_mesh(2, kShort);
  auto out = run_outcomes(*mesh, [&](int rank) {
    if (rank == 1) return idle_until_failed(*mesh);
    int64_t x;
    mesh->comm(rank, "world").recv(&x, 1, DType::I64, 1, 4);
  });
  EXPECT_EQ(out[0].code, DT_ERR_TIMEOUT) << out[0].what;
  EXPECT_TRUE(contains(out[0].what, "recv on axis world")) << out[0].what;
  EXPECT_TRUE(contains(out[0].what, "[1]")) << out[0].what;
}

TEST(Timeout, AsyncWorkReportsItInTestAndWait) {
  auto mesh = world_mesh(2, kShort);
  std::atomic<int> test_threw{0};
  auto out = run_outcomes(*mesh, [&](int rank) {
    if (rank == 1) return idle_until_failed(*mesh);
    float x = 1;
    WorkPtr w = mesh->comm(rank, "world").all_reduce_async(&x, &x, 1, DType::F32, ReduceOp::Sum);
    try {
      while (!w->test()) std::this_thread::yield();
    } catch (const Error& e) {
      if (e.code() == DT_ERR_TIMEOUT) test_threw = 1;
    }
    w->wait();  // rethrows the same error
  });
  EXPECT_EQ(test_threw.load(), 1);
  EXPECT_EQ(out[0].code, DT_ERR_TIMEOUT) << out[0].what;
}

// Ranks wait for a rank that never comes; another thread aborts. Rank 3 waits for the
// abort too, inside a wait on async work.
TEST(Abort, FromAnotherThreadEndsEveryWait) {
  auto mesh = world_mesh(5, kLong);
  std::atomic<bool> aborted{false};
  std::chrono::steady_clock::time_point t_abort;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the ranks block
    t_abort = std::chrono::steady_clock::now();
    aborted = true;
    mesh->abort("operator pressed stop");
  });
  std::vector<double> latency(5, -1);
  auto out = run_outcomes(*mesh, [&](int rank) {
    if (rank == 4) return idle_until_failed(*mesh);
    try {
      float x[3] = {};
      Communicator& c = mesh->comm(rank, "world");
      if (rank == 3) c.all_reduce_async(x, x, 3, DType::F32, ReduceOp::Sum)->wait();
      else c.all_reduce(x, x, 3, DType::F32, ReduceOp::Sum);
    } catch (const Error&) {
      if (aborted) latency[rank] = seconds_since(t_abort);
      throw;
    }
  });
  aborter.join();
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(out[r].code, DT_ERR_ABORTED) << "rank " << r << ": " << out[r].what;
    EXPECT_TRUE(contains(out[r].what, "operator pressed stop")) << out[r].what;
    EXPECT_GE(latency[r], 0.0) << "rank " << r << " failed before the abort";
    EXPECT_LT(latency[r], 1.0) << "rank " << r;
  }
}

TEST(ErrorState, FailedMeshStaysFailedAndANewMeshWorks) {
  auto mesh = world_mesh(2, kShort);
  auto out = run_outcomes(*mesh, [&](int rank) {
    if (rank == 1) return idle_until_failed(*mesh);
    mesh->comm(rank, "world").barrier();
  });
  ASSERT_EQ(out[0].code, DT_ERR_TIMEOUT);
  // Every later entry reports the same error: run(), a collective, check_healthy().
  Error e1 = expect_error([&] { mesh->run([](int, int) {}); });
  EXPECT_EQ(e1.code(), DT_ERR_TIMEOUT);
  EXPECT_EQ(std::string(e1.what()), out[0].what);
  float x = 1;
  EXPECT_EQ(expect_error([&] { mesh->comm(0, "world").all_reduce(&x, &x, 1, DType::F32, ReduceOp::Sum); }).code(),
            DT_ERR_TIMEOUT);
  EXPECT_EQ(expect_error([&] { mesh->comm(1, "world").barrier_async(); }).code(), DT_ERR_TIMEOUT);
  EXPECT_EQ(expect_error([&] { mesh->check_healthy(); }).code(), DT_ERR_TIMEOUT);
  mesh->abort("later");  // the first failure is the one kept
  EXPECT_EQ(expect_error([&] { mesh->check_healthy(); }).code(), DT_ERR_TIMEOUT);

  auto fresh = world_mesh(2, kShort);
  std::vector<float> got(2);
  fresh->run([&](int, int rank) {
    float v = static_cast<float>(rank + 1);
    fresh->comm(rank, "world").all_reduce(&v, &v, 1, DType::F32, ReduceOp::Sum);
    got[rank] = v;
  });
  EXPECT_EQ(got, (std::vector<float>{3, 3}));
}

TEST(RankFailure, ThrowingRankFailsItsPeersAtOnce) {
  auto mesh = world_mesh(3, kLong);
  std::string run_error;
  auto out = run_outcomes(
      *mesh,
      [&](int rank) {
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));  // peers are waiting
          throw std::runtime_error("boom in the forward pass");
        }
        std::vector<float> x(50000, 1.0f);
        mesh->comm(rank, "world").all_reduce(x.data(), x.data(), 50000, DType::F32, ReduceOp::Sum);
      },
      &run_error);
  EXPECT_EQ(run_error, "boom in the forward pass");  // run() reports the rank that failed first
  for (int r : {0, 2}) {
    EXPECT_EQ(out[r].code, DT_ERR_ABORTED) << out[r].what;
    EXPECT_TRUE(contains(out[r].what, "rank 1 failed: boom")) << out[r].what;
  }
}

TEST(RankFailure, ThrownErrorKeepsItsCode) {
  auto mesh = world_mesh(2, kLong);
  Error e = expect_error([&] {
    mesh->run([&](int, int rank) {
      if (rank == 0) throw Error(DT_ERR_OUT_OF_MEMORY, "no room for activations");
      mesh->comm(rank, "world").barrier();
    });
  });
  EXPECT_EQ(e.code(), DT_ERR_OUT_OF_MEMORY);
}

TEST(RankFailure, RankThatReturnsEarlyIsReported) {
  auto mesh = world_mesh(3, kLong);
  auto out = run_outcomes(*mesh, [&](int rank) {
    Communicator& c = mesh->comm(rank, "world");
    int32_t x = 1;
    c.all_reduce(&x, &x, 1, DType::I32, ReduceOp::Sum);  // everyone
    if (rank == 2) return;                               // skips the second
    c.all_reduce(&x, &x, 1, DType::I32, ReduceOp::Sum);
  });
  for (int r : {0, 1}) {
    EXPECT_EQ(out[r].code, DT_ERR_COMM) << out[r].what;
    // The world's first failure, whichever of ranks 0 and 1 saw it first.
    EXPECT_TRUE(contains(out[r].what, "all_reduce on axis world (seq 2 on rank ")) << out[r].what;
    EXPECT_TRUE(contains(out[r].what, "): rank(s) [2] returned without joining it (rank 2 last entered seq 1)"))
        << out[r].what;
  }
}

TEST(RankFailure, RecvFromAPeerThatReturned) {
  auto mesh = world_mesh(2, kLong);
  auto out = run_outcomes(*mesh, [&](int rank) {
    if (rank == 1) return;
    float x;
    mesh->comm(rank, "world").recv(&x, 1, DType::F32, 1);
  });
  EXPECT_EQ(out[0].code, DT_ERR_COMM) << out[0].what;
  EXPECT_TRUE(contains(out[0].what, "recv on axis world (seq 1 on rank 0): rank(s) [1] returned without joining it")) << out[0].what;
}

// A peer that returns right after finishing its part is not "missing": a waiter that
// sees it gone must look at the result it waits for once more.
TEST(RankFailure, PeerLeavingRightAfterItsPartIsNoError) {
  auto mesh = world_mesh(2, kLong);
  for (int i = 0; i < 200; ++i) {
    int64_t got = -1;
    mesh->run([&](int, int rank) {
      Communicator& c = mesh->comm(rank, "world");
      int64_t v = i;
      if (rank == 0) c.send(&v, 1, DType::I64, 1);
      else c.recv(&got, 1, DType::I64, 0);
      c.barrier();  // the last arriver returns at once, the other is still waking up
    });
    ASSERT_EQ(got, i);
  }
}

}  // namespace
}  // namespace dt::comm::test
