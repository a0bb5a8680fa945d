// The mpi backend through the mesh: axes and groups, per-axis collectives, async work,
// point to point, the comm ledger, and the world-size checks.
#include <thread>

#include "core/error.h"
#include "mpi/mpi_test_util.h"

namespace dt::comm::mpitest {
namespace {

std::vector<float> filled(size_t n, float v) { return std::vector<float>(n, v); }

TEST_F(MpiTest, MeshAxesGroupsAndPerAxisAllReduce) {
  const int me = world_rank(), n = world_size();
  if (n % 2 != 0) GTEST_SKIP() << "needs an even number of ranks";
  auto mesh = mpi_mesh({n / 2, 1, 1, 1, 2});  // dp x tp; tp is innermost: adjacent ranks
  EXPECT_STREQ(mesh->backend(), "mpi");
  EXPECT_EQ(mesh->world_size(), n);
  EXPECT_EQ(mesh->local_ranks(), std::vector<int>{me});
  std::vector<int> dp, tp = {me - me % 2, me - me % 2 + 1};
  for (int r = me % 2; r < n; r += 2) dp.push_back(r);
  EXPECT_EQ(mesh->group_members(me, "dp"), dp);
  EXPECT_EQ(mesh->group_members(me, "tp"), tp);
  EXPECT_EQ(mesh->comm(me, "dp").size(), n / 2);
  EXPECT_EQ(mesh->comm(me, "tp").rank(), me % 2);
  EXPECT_EQ(mesh->comm(me, "dp").axis(), "dp");
  mesh->run([&](int, int rank) {
    EXPECT_EQ(rank, me);
    auto big = filled(100000, static_cast<float>(rank + 1)), small = filled(5, static_cast<float>(rank + 1));
    mesh->comm(rank, "dp").all_reduce(big.data(), big.data(), big.size(), DType::F32, ReduceOp::Sum);
    mesh->comm(rank, "tp").all_reduce(small.data(), small.data(), small.size(), DType::F32, ReduceOp::Max);
    float dp_sum = 0;
    for (int r : dp) dp_sum += static_cast<float>(r + 1);
    EXPECT_EQ(big[0], dp_sum);
    EXPECT_EQ(big[99999], dp_sum);
    EXPECT_EQ(small[4], static_cast<float>(tp[1] + 1));
    // A product of axes is created on first use: every rank reaches this line in order.
    int64_t x = rank;
    mesh->comm(rank, "tp*dp").all_reduce(&x, &x, 1, DType::I64, ReduceOp::Sum);
    EXPECT_EQ(x, int64_t{n} * (n - 1) / 2);
  });
}

TEST_F(MpiTest, WorldSizeMustMatch) {
  const int n = world_size();
  BackendOptions o;
  o.world_size = n + 1;
  try {
    make_mpi_backend(o);
    ADD_FAILURE() << "expected INVALID_ARGUMENT";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DT_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("world_size = " + std::to_string(n + 1)), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("has " + std::to_string(n) + " ranks"), std::string::npos) << e.what();
  }
  EXPECT_THROW(mpi_mesh({n + 1, 1, 1, 1, 1}), Error);  // the mesh's product check
  o.world_size = n;
  EXPECT_EQ(make_mpi_backend(o)->world_size(), n);
}

TEST_F(MpiTest, AsyncWorkProgressesWhenTestedAndKeepsIssueOrder) {
  auto mesh = mpi_mesh();
  const int me = world_rank(), n = world_size();
  Communicator& c = mesh->comm(me, "world");
  auto a = filled(1000, 1.0f);
  std::vector<int64_t> b(100003, me == n - 1 ? 7 : 0);
  std::vector<int64_t> d(100003, 2 * me);
  auto wa = c.all_reduce_async(a.data(), a.data(), a.size(), DType::F32, ReduceOp::Sum);
  auto wb = c.broadcast_async(b.data(), b.data(), b.size(), DType::I64, n - 1);
  auto wd = c.all_reduce_async(d.data(), d.data(), d.size(), DType::I64, ReduceOp::Avg);
  auto wbar = c.barrier_async();
  while (!wb->test()) std::this_thread::yield();  // polling alone drives it to the end
  wd->wait();  // out of issue order
  wa->wait();
  wbar->wait();
  EXPECT_TRUE(wa->test());
  EXPECT_EQ(a[999], static_cast<float>(n));
  EXPECT_EQ(b[100002], 7);
  EXPECT_EQ(d[0], n - 1);  // (2 * sum of ranks) / n
}

TEST_F(MpiTest, SendRecvRing) {
  auto mesh = mpi_mesh();
  const int me = world_rank(), n = world_size();
  Communicator& c = mesh->comm(me, "dp");
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  for (DType t : {DType::F32, DType::BF16, DType::I64})
    for (int64_t count : {0, 1, 7, 100003}) {
      auto mine = make_buffer(t, count, [&](int64_t i) { return (me * 7 + i) % 200; });
      auto want = make_buffer(t, count, [&](int64_t i) { return (prev * 7 + i) % 200; });
      std::vector<char> got(want.size());
      c.send(mine.data(), count, t, next, 3);  // eager: returns before the peer receives
      c.recv(got.data(), count, t, prev, 3);
      EXPECT_EQ(first_difference(t, got, want), -1) << dtype_name(t) << " count " << count;
    }
  // Receives may take tags in another order than the sends (large messages included).
  auto one = filled(100003, 1.0f), two = filled(100003, 2.0f), r1 = filled(100003, 0), r2 = filled(100003, 0);
  c.send(one.data(), one.size(), DType::F32, next, 1);
  c.send(two.data(), two.size(), DType::F32, next, 2);
  c.recv(r2.data(), r2.size(), DType::F32, prev, 2);
  c.recv(r1.data(), r1.size(), DType::F32, prev, 1);
  EXPECT_EQ(r1[100002], 1.0f);
  EXPECT_EQ(r2[0], 2.0f);
  // Async receive posted before the matching send.
  int32_t in = -1, out = me;
  auto wr = c.recv_async(&in, 1, DType::I32, prev, 4);
  c.send(&out, 1, DType::I32, next, 4);
  wr->wait();
  EXPECT_EQ(in, prev);
}

TEST_F(MpiTest, LedgerCountsCallsAndBytes) {
  auto mesh = mpi_mesh();
  const int me = world_rank(), n = world_size();
  Communicator& c = mesh->comm(me, "world");
  c.ledger().reset();
  auto x = filled(10, 1.0f);
  for (int i = 0; i < 3; ++i) c.all_reduce(x.data(), x.data(), 10, DType::F32, ReduceOp::Sum);
  std::vector<int64_t> y(5, me);
  c.broadcast(y.data(), y.data(), 5, DType::I64, 0);
  std::vector<float> gathered(4 * n);
  c.all_gather(x.data(), gathered.data(), 4, DType::F32);
  if (me == 0) c.send(x.data(), 7, DType::F32, 1);
  if (me == 1) c.recv(x.data(), 7, DType::F32, 0);
  c.barrier();  // also retires rank 0's eager send, which is recorded when it completes
  EXPECT_EQ(c.ledger().get(CollKind::AllReduce).calls, 3);
  EXPECT_EQ(c.ledger().get(CollKind::AllReduce).bytes, 3 * 10 * 4);
  EXPECT_GE(c.ledger().get(CollKind::AllReduce).seconds, 0.0);
  EXPECT_EQ(c.ledger().get(CollKind::Broadcast).calls, 1);
  EXPECT_EQ(c.ledger().get(CollKind::Broadcast).bytes, me == 0 ? 40 : 0);
  EXPECT_EQ(c.ledger().get(CollKind::AllGather).bytes, 16);
  EXPECT_EQ(c.ledger().get(CollKind::Barrier).calls, 1);
  EXPECT_EQ(c.ledger().get(CollKind::Send).bytes, me == 0 ? 28 : 0);
  EXPECT_EQ(c.ledger().get(CollKind::Recv).bytes, me == 1 ? 28 : 0);
  EXPECT_EQ(c.ledger().get(CollKind::ReduceScatter).calls, 0);
  EXPECT_EQ(mesh->comm(me, "dp").ledger().get(CollKind::AllReduce).calls, 0);  // per communicator
}

TEST_F(MpiTest, ArgumentErrorsLeaveTheMeshHealthy) {
  auto mesh = mpi_mesh();
  const int me = world_rank();
  Communicator& c = mesh->comm(me, "dp");
  float x = 1;
  try {
    c.send(&x, 1, DType::F32, (me + 1) % world_size(), -1);
    ADD_FAILURE() << "expected INVALID_ARGUMENT";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DT_ERR_INVALID_ARGUMENT) << e.what();
    EXPECT_NE(std::string(e.what()).find("tag = -1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(c.all_reduce(&x, nullptr, 1, DType::F32, ReduceOp::Sum), Error);  // central validation
  EXPECT_NO_THROW(mesh->check_healthy());
  c.all_reduce(&x, &x, 1, DType::F32, ReduceOp::Sum);
  EXPECT_EQ(x, static_cast<float>(world_size()));
}

}  // namespace
}  // namespace dt::comm::mpitest
