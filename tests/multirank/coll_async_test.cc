// Asynchronous collectives on the local backend: every *_async returns a Work that
// completes with the right data; several can be in flight; a communicator's operations run
// in issue order, blocking ones included; and they progress while the rank thread computes.
#include <atomic>
#include <numeric>

#include "multirank/coll_util.h"

namespace dt::comm::test {
namespace DT_TEST_NS {

// Polls test() until the work is done (its operation has a deadline, so this ends).
void spin_until_done(const WorkPtr& w) {
  while (!w->test()) std::this_thread::yield();
}

TEST(Async, EveryKindReturnsWorkWithTheRightResult) {
  const int n = 3;
  auto mesh = world_mesh(n);
  std::vector<std::vector<int32_t>> got(n);
  mesh->run([&](int, int rank) {
    Communicator& c = mesh->comm(rank, "world");
    std::vector<int32_t> in(6), ar(6), ag(6 * n), rs(2), bc(6), rd(6, -1), a2a(n), p2p(1, -1);
    std::iota(in.begin(), in.end(), rank * 10);  // rank r: r*10 .. r*10+5
    std::vector<int32_t> a2a_in(n, rank);
    std::vector<int64_t> ones(n, 1);
    int32_t token = 100 + rank;
    std::vector<WorkPtr> w = {
        c.all_reduce_async(in.data(), ar.data(), 6, DType::I32, ReduceOp::Sum),
        c.all_gather_async(in.data(), ag.data(), 6, DType::I32),
        c.reduce_scatter_async(in.data(), rs.data(), 2, DType::I32, ReduceOp::Max),
        c.broadcast_async(in.data(), bc.data(), 6, DType::I32, 2),
        c.reduce_async(in.data(), rd.data(), 6, DType::I32, ReduceOp::Min, 1),
        c.all_to_all_async(a2a_in.data(), ones, a2a.data(), ones, DType::I32),
        c.barrier_async(),
        rank == 0 ? c.send_async(&token, 1, DType::I32, 2, 9) : nullptr,
        rank == 2 ? c.recv_async(p2p.data(), 1, DType::I32, 0, 9) : nullptr,
    };
    for (auto& x : w)
      if (x) x->wait();
    for (auto* v : {&ar, &ag, &rs, &bc, &rd, &a2a, &p2p}) got[rank].insert(got[rank].end(), v->begin(), v->end());
  });
  for (int r = 0; r < n; ++r) {
    std::vector<int32_t> want;
    for (int i = 0; i < 6; ++i) want.push_back(30 + 3 * i);  // all-reduce: 0+10+20 + 3i
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < 6; ++i) want.push_back(p * 10 + i);  // all-gather
    for (int i = 0; i < 2; ++i) want.push_back(20 + 2 * r + i);  // reduce-scatter max: rank 2's block r
    for (int i = 0; i < 6; ++i) want.push_back(20 + i);  // broadcast from 2
    for (int i = 0; i < 6; ++i) want.push_back(r == 1 ? i : -1);  // min to root 1
    for (int p = 0; p < n; ++p) want.push_back(p);  // all-to-all: one element from each
    want.push_back(r == 2 ? 100 : -1);  // send 0 -> 2
    EXPECT_EQ(got[r], want) << "rank " << r;
  }
}

TEST(Async, ManyInFlightThenWait) {
  const int n = 4;
  auto mesh = world_mesh(n);
  std::vector<int> wrong(n, 0);
  mesh->run([&](int, int rank) {
    Communicator& c = mesh->comm(rank, "world");
    constexpr int kInFlight = 16;
    std::vector<std::vector<float>> bufs(kInFlight);
    std::vector<WorkPtr> works;
    for (int k = 0; k < kInFlight; ++k) {
      // Alternate small and large (past 16 KiB) so both paths queue up.
      bufs[k].assign(k % 2 ? 5000 : 7, static_cast<float>(rank * k));
      works.push_back(c.all_reduce_async(bufs[k].data(), bufs[k].data(), static_cast<int64_t>(bufs[k].size()),
                                         DType::F32, ReduceOp::Sum));
    }
    for (auto& w : works) w->wait();
    for (int k = 0; k < kInFlight; ++k)
      for (float v : bufs[k])
        if (v != static_cast<float>(6 * k)) ++wrong[rank];  // (0+1+2+3) * k
  });
  EXPECT_EQ(wrong, std::vector<int>(n, 0));
}

// Sum then max and max then sum give different answers, so the result shows the order.
TEST(Async, BlockingCallRunsAfterQueuedAsyncWork) {
  const int n = 4;
  auto mesh = world_mesh(n);
  std::vector<float> got(n);
  std::vector<int> earlier_done(n, 0);
  mesh->run([&](int, int rank) {
    Communicator& c = mesh->comm(rank, "world");
    std::vector<float> x(3000, static_cast<float>(rank + 1));
    WorkPtr first = c.all_reduce_async(x.data(), x.data(), 3000, DType::F32, ReduceOp::Sum);  // 10
    c.all_reduce(x.data(), x.data(), 3000, DType::F32, ReduceOp::Max);  // max(10) = 10; before: 16
    earlier_done[rank] = first->test();  // ran before the blocking call, so finished
    first->wait();
    got[rank] = x[2999];
  });
  EXPECT_EQ(got, std::vector<float>(n, 10.0f));
  EXPECT_EQ(earlier_done, std::vector<int>(n, 1));
}

TEST(Async, TestBecomesTrueWithoutWait) {
  auto mesh = world_mesh(3);
  std::vector<int64_t> got(3);
  mesh->run([&](int, int rank) {
    Communicator& c = mesh->comm(rank, "world");
    int64_t v = rank + 1;
    WorkPtr w = c.all_reduce_async(&v, &v, 1, DType::I64, ReduceOp::Prod);
    spin_until_done(w);
    EXPECT_TRUE(w->test());  // stays true
    w->wait();               // and wait() returns at once
    got[rank] = v;
  });
  EXPECT_EQ(got, std::vector<int64_t>(3, 6));
}

// The rank computes in chunks, polling between them, until the all-reduce it started has
// finished: completion needs no wait() from the rank, and both results are right.
TEST(Async, OverlapsWithComputeOnTheRankThread) {
  const int n = 4;
  auto mesh = world_mesh(n);
  std::vector<int> wrong(n, 0);
  mesh->run([&](int, int rank) {
    Communicator& c = mesh->comm(rank, "world");
    std::vector<float> grad(200000, 0.5f * static_cast<float>(rank));
    WorkPtr w = c.all_reduce_async(grad.data(), grad.data(), 200000, DType::F32, ReduceOp::Sum);
    std::vector<double> act(4096);
    int64_t chunks = 0;
    do {  // "compute": a chunk of work that touches only memory of its own
      for (size_t i = 0; i < act.size(); ++i) act[i] = act[i] * 0.5 + static_cast<double>(i + chunks);
      ++chunks;
    } while (!w->test());
    w->wait();
    for (float g : grad)
      if (g != 3.0f) ++wrong[rank];  // 0.5 * (0+1+2+3)
    if (chunks < 1 || act[1] <= 0.0) ++wrong[rank];
  });
  EXPECT_EQ(wrong, std::vector<int>(n, 0));
}

// Each communicator has its own queue: async work on tp and dp is in flight at once, and
// a tp wait never depends on dp progress.
TEST(Async, TwoAxesInFlightAtOnce) {
  auto mesh = axes_mesh({2, 1, 1, 1, 2});
  std::vector<std::vector<int32_t>> got(4);
  mesh->run([&](int, int rank) {
    std::vector<int32_t> tp(5000, rank), dp(5000, rank);
    WorkPtr wt = mesh->comm(rank, "tp").all_reduce_async(tp.data(), tp.data(), 5000, DType::I32, ReduceOp::Sum);
    WorkPtr wd = mesh->comm(rank, "dp").all_reduce_async(dp.data(), dp.data(), 5000, DType::I32, ReduceOp::Sum);
    wd->wait();
    wt->wait();
    got[rank] = {tp.front(), tp.back(), dp.front(), dp.back()};
  });
  EXPECT_EQ(got[0], (std::vector<int32_t>{1, 1, 2, 2}));  // tp {0,1}; dp {0,2}
  EXPECT_EQ(got[3], (std::vector<int32_t>{5, 5, 4, 4}));  // tp {2,3}; dp {1,3}
}

// The order of async and blocking calls holds over many rounds with shuffled arrivals: the
// blocking call always reads what the async call before it wrote.
TEST(Async, InterleavedAsyncAndBlockingRounds) {
  const int n = 3;
  auto mesh = world_mesh(n);
  std::vector<int> wrong(n, 0);
  mesh->run([&](int, int rank) {
    Communicator& c = mesh->comm(rank, "world");
    Jitter jitter(static_cast<uint64_t>(rank) * 3 + 1);
    for (int i = 0; i < 50; ++i) {
      int64_t a = rank + i, b = 1;
      jitter();
      WorkPtr w = c.all_reduce_async(&a, &a, 1, DType::I64, ReduceOp::Sum);
      c.all_reduce(&a, &b, 1, DType::I64, ReduceOp::Max);  // sees the finished sum
      jitter();
      w->wait();
      if (a != 3 + 3 * i || b != a) ++wrong[rank];
    }
  });
  EXPECT_EQ(wrong, std::vector<int>(n, 0));
}

}  // namespace
}  // namespace dt::comm::test
