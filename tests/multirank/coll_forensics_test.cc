// Hang forensics on the local backend: a timeout names this rank's sequence number and how
// far each missing rank got; every rank keeps a history of its last collectives (kind,
// axis, seq, bytes, times, how each ended) that reads the same after a failure; and a failed
// mesh ends and joins every rank thread, including the async progress threads.
#include <nlohmann/json.hpp>

#include "multirank/coll_util.h"

namespace dt::comm::test {
namespace DT_TEST_NS {

constexpr double kShort = 0.5;

TEST(Forensics, TimeoutNamesTheSeqAndHowFarTheMissingRankGot) {
  auto mesh = world_mesh(3, kShort);
  auto out = run_outcomes(*mesh, [&](int rank) {
    float x[2] = {};
    Communicator& c = mesh->comm(rank, "world");
    c.all_reduce(x, x, 2, DType::F32, ReduceOp::Sum);  // seq 1, everyone
    if (rank == 2) return idle_until_failed(*mesh);      // never calls seq 2
    c.all_reduce(x, x, 2, DType::F32, ReduceOp::Sum);
  });
  for (int r : {0, 1}) {
    EXPECT_EQ(out[r].code, DT_ERR_TIMEOUT) << out[r].what;
    // The world's first failure, whichever of ranks 0 and 1 saw it first.
    EXPECT_TRUE(contains(out[r].what, "all_reduce on axis world (seq 2 on rank ")) << out[r].what;
    EXPECT_TRUE(contains(out[r].what, ") timed out after 0.5 s")) << out[r].what;
    EXPECT_TRUE(contains(out[r].what, "rank(s) [2] did not arrive (rank 2 last entered seq 1)")) << out[r].what;
  }
}

TEST(Forensics, HistoryKeepsEachCallWithItsSeqAxisAndOutcome) {
  auto mesh = axes_mesh({2, 1, 1, 1, 2}, kShort);  // dp groups {0,2},{1,3}; tp {0,1},{2,3}
  auto out = run_outcomes(*mesh, [&](int rank) {
    int32_t x[4] = {};
    mesh->comm(rank, "tp").all_reduce(x, x, 4, DType::I32, ReduceOp::Sum);
    mesh->comm(rank, "dp").broadcast(x, x, 4, DType::I32, 0);
    if (rank == 3) return idle_until_failed(*mesh);
    mesh->comm(rank, "tp").barrier();  // rank 2 waits for 3 in vain
  });
  ASSERT_EQ(out[2].code, DT_ERR_TIMEOUT) << out[2].what;
  auto calls = [&](int rank) { return nlohmann::json::parse(mesh->history_json(rank)); };
  nlohmann::json h2 = calls(2);
  ASSERT_EQ(h2.size(), 3u) << h2.dump();
  EXPECT_EQ(h2[0]["kind"], "all_reduce");
  EXPECT_EQ(h2[0]["axis"], "tp");
  EXPECT_EQ(h2[0]["seq"], 1);
  EXPECT_EQ(h2[0]["bytes"], 16);
  EXPECT_EQ(h2[0]["status"], "ok");
  EXPECT_EQ(h2[1]["axis"], "dp");
  EXPECT_EQ(h2[1]["seq"], 1);  // numbered per communicator
  EXPECT_EQ(h2[2]["kind"], "barrier");
  EXPECT_EQ(h2[2]["seq"], 2);
  EXPECT_EQ(h2[2]["status"], "timeout");
  EXPECT_GE(h2[2]["seconds"].get<double>(), kShort);
  EXPECT_LE(h2[0]["start_unix_s"].get<double>(), h2[2]["start_unix_s"].get<double>());
  EXPECT_EQ(calls(3).size(), 2u);  // the late rank never called its third
  EXPECT_EQ(calls(0).back()["status"], "ok");  // group {0,1} completed its barrier
}

TEST(Forensics, HistoryRingKeepsTheNewestCalls) {
  auto mesh = world_mesh(2, 60);
  const int calls = static_cast<int>(CollHistory::kCapacity) + 10;
  mesh->run([&](int, int rank) {
    for (int i = 0; i < calls; ++i) mesh->comm(rank, "world").barrier();
  });
  nlohmann::json h = nlohmann::json::parse(mesh->history_json(1));
  ASSERT_EQ(h.size(), CollHistory::kCapacity);
  EXPECT_EQ(h.front()["seq"], calls - static_cast<int>(CollHistory::kCapacity) + 1);
  EXPECT_EQ(h.back()["seq"], calls);
  EXPECT_EQ(mesh->history_json(0).find("running"), std::string::npos);
}

// A rank whose async work is queued behind a collective that fails: run() returns on every
// rank, the failed work reports the error, and destroying the mesh joins every thread.
TEST(Forensics, FailedMeshEndsEveryRankAndProgressThread) {
  auto t0 = std::chrono::steady_clock::now();
  {
    auto mesh = world_mesh(4, kShort);
    auto out = run_outcomes(*mesh, [&](int rank) {
      if (rank == 3) return idle_until_failed(*mesh);
      float x[8] = {};
      Communicator& c = mesh->comm(rank, "world");
      WorkPtr a = c.all_reduce_async(x, x, 8, DType::F32, ReduceOp::Sum);
      WorkPtr b = c.barrier_async();  // queued behind a on the progress thread
      wait_ignoring_errors(a);
      b->wait();
    });
    for (int r = 0; r < 3; ++r) EXPECT_NE(out[r].code, DT_OK) << "rank " << r;
  }  // ~Mesh joins the rank threads; ~LocalComm the progress threads
  EXPECT_LT(seconds_since(t0), kShort + 5);
}

}  // namespace
}  // namespace dt::comm::test
