// Sub-communicators of a mesh (each axis and products of axes) and the comm ledger.
//
// Group sums use 2^rank as each rank's input: the sum then spells out exactly which ranks
// took part, so a group with a wrong member (or a missing one) cannot pass by accident.
#include "multirank/coll_util.h"

namespace dt::comm::test {
namespace DT_TEST_NS {

int64_t bits_of(const std::vector<int>& ranks) {
  int64_t s = 0;
  for (int r : ranks) s |= int64_t{1} << r;
  return s;
}

// Every rank all-reduces over every axis set; each result must be its group's sum.
void check_axes(const Coords& axes, const std::vector<std::string>& sets) {
  auto mesh = axes_mesh(axes);
  const int n = mesh->world_size();
  std::vector<std::vector<int64_t>> small(n);
  std::vector<std::vector<float>> large(n);
  mesh->run([&](int, int rank) {
    for (const std::string& s : sets) {
      Communicator& comm = mesh->comm(rank, s);
      int64_t v[3] = {int64_t{1} << rank, 1, rank};
      comm.all_reduce(v, v, 3, DType::I64, ReduceOp::Sum);
      small[rank].insert(small[rank].end(), v, v + 3);
      std::vector<float> big(20000, static_cast<float>(rank + 1));  // 80 KB: the large path
      comm.all_reduce(big.data(), big.data(), 20000, DType::F32, ReduceOp::Sum);
      large[rank].push_back(big.front());
      large[rank].push_back(big.back());
    }
  });
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < sets.size(); ++i) {
      std::vector<int> members = mesh->group_members(r, sets[i]);
      int64_t rank_sum = 0;
      for (int m : members) rank_sum += m;
      const std::string what = "rank " + std::to_string(r) + " over " + sets[i];
      EXPECT_EQ(small[r][3 * i], bits_of(members)) << what;
      EXPECT_EQ(small[r][3 * i + 1], static_cast<int64_t>(members.size())) << what;
      EXPECT_EQ(small[r][3 * i + 2], rank_sum) << what;
      EXPECT_EQ(large[r][2 * i], static_cast<float>(rank_sum + members.size())) << what;
      EXPECT_EQ(large[r][2 * i + 1], static_cast<float>(rank_sum + members.size())) << what;
    }
}

TEST(SubComm, DpByTp) {
  auto mesh = axes_mesh({2, 1, 1, 1, 2});
  // rank = dp * 2 + tp: tp groups are adjacent ranks, dp groups stride by the tp size.
  EXPECT_EQ(mesh->coords(3), (Coords{1, 0, 0, 0, 1}));
  EXPECT_EQ(mesh->coords(2), (Coords{1, 0, 0, 0, 0}));
  EXPECT_EQ(mesh->group_members(0, "tp"), (std::vector<int>{0, 1}));
  EXPECT_EQ(mesh->group_members(3, "tp"), (std::vector<int>{2, 3}));
  EXPECT_EQ(mesh->group_members(0, "dp"), (std::vector<int>{0, 2}));
  EXPECT_EQ(mesh->group_members(3, "dp"), (std::vector<int>{1, 3}));
  EXPECT_EQ(mesh->group_members(2, "pp"), (std::vector<int>{2}));  // a size-1 axis: alone
  EXPECT_EQ(mesh->group_members(2, "tp*dp"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(Mesh::canonical_axes("tp*dp"), "dp*tp");
  for (int r = 0; r < 4; ++r) EXPECT_EQ(mesh->rank_of(mesh->coords(r)), r);
  check_axes({2, 1, 1, 1, 2}, {"dp", "tp", "dp*tp", "tp*dp", "world", "pp", "ep*cp"});
}

TEST(SubComm, DpByPpByTp) {
  auto mesh = axes_mesh({2, 2, 1, 1, 2});
  // rank = dp * 4 + pp * 2 + tp
  EXPECT_EQ(mesh->coords(6), (Coords{1, 1, 0, 0, 0}));
  EXPECT_EQ(mesh->group_members(6, "tp"), (std::vector<int>{6, 7}));
  EXPECT_EQ(mesh->group_members(6, "pp"), (std::vector<int>{4, 6}));
  EXPECT_EQ(mesh->group_members(6, "dp"), (std::vector<int>{2, 6}));
  EXPECT_EQ(mesh->group_members(6, "dp*tp"), (std::vector<int>{2, 3, 6, 7}));
  EXPECT_EQ(mesh->group_members(6, "pp*tp"), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(mesh->group_members(5, "dp*pp"), (std::vector<int>{1, 3, 5, 7}));
  for (int r = 0; r < 8; ++r) EXPECT_EQ(mesh->rank_of(mesh->coords(r)), r);
  check_axes({2, 2, 1, 1, 2}, {"dp", "pp", "tp", "dp*tp", "pp*tp", "dp*pp", "dp*pp*tp", "world"});
}

TEST(SubComm, RankSizeAxisAndRootsAreGroupLocal) {
  auto mesh = axes_mesh({2, 2, 1, 1, 2});
  std::vector<std::vector<int>> seen(8);
  mesh->run([&](int, int rank) {
    for (const char* s : {"dp", "pp*tp", "world"}) {
      Communicator& comm = mesh->comm(rank, s);
      std::vector<int> members = mesh->group_members(rank, s);
      // Roots name a member index; member 1 of this group broadcasts its global rank.
      int32_t v = rank;
      comm.broadcast(&v, &v, 1, DType::I32, 1);
      seen[rank].insert(seen[rank].end(), {comm.rank(), comm.size(), v, members[1]});
      EXPECT_EQ(members[comm.rank()], rank) << s;
    }
  });
  for (int r = 0; r < 8; ++r) {
    ASSERT_EQ(seen[r].size(), 12u);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(seen[r][4 * i + 2], seen[r][4 * i + 3]) << "rank " << r;
    EXPECT_EQ(seen[r][1], 2);
    EXPECT_EQ(seen[r][5], 4);
    EXPECT_EQ(seen[r][9], 8);
    EXPECT_EQ(seen[r][8], r);  // the world group is in global order
  }
  EXPECT_EQ(mesh->comm(0, "tp*pp").axis(), "pp*tp");
  EXPECT_EQ(&mesh->comm(0, "tp*pp"), &mesh->comm(0, "pp*tp"));  // one communicator per group
}

// The ledger counts this rank's contribution per kind, on each communicator separately.
TEST(Ledger, CallsAndBytesPerKind) {
  const int n = 3;
  auto mesh = world_mesh(n);
  mesh->run([&](int, int rank) {
    Communicator& c = mesh->comm(rank, "world");
    std::vector<char> a(4096), b(4096);
    c.all_reduce(a.data(), b.data(), 10, DType::F32, ReduceOp::Sum);  // 40
    c.all_reduce_async(a.data(), a.data(), 100, DType::I64, ReduceOp::Max)->wait();  // 800
    c.all_gather(a.data(), b.data(), 5, DType::BF16);                              // 10
    c.reduce_scatter(a.data(), b.data(), 4, DType::I64, ReduceOp::Sum);            // n * 32
    c.broadcast(a.data(), b.data(), 7, DType::F32, 1);                             // 28 on root 1
    c.reduce(a.data(), b.data(), 6, DType::I32, ReduceOp::Sum, 0);                 // 24 everywhere
    std::vector<int64_t> sc(n), rc(n);
    for (int p = 0; p < n; ++p) sc[p] = rank + p, rc[p] = p + rank;  // r sends r+p to p
    c.all_to_all(a.data(), sc, b.data(), rc, DType::F16);                          // 2 * sum(sc)
    if (rank == 0) c.send(a.data(), 9, DType::F16, 1);                             // 18
    if (rank == 1) c.recv(b.data(), 9, DType::F16, 0);                             // 18
    c.barrier();
    c.barrier();
    EXPECT_THROW(c.all_reduce(nullptr, b.data(), 5, DType::F32, ReduceOp::Sum), Error);  // not counted
  });
  for (int r = 0; r < n; ++r) {
    CommLedger& l = mesh->comm(r, "world").ledger();
    auto expect = [&](CollKind k, int64_t calls, int64_t bytes) {
      CollStats s = l.get(k);
      EXPECT_EQ(s.calls, calls) << coll_name(k) << " rank " << r;
      EXPECT_EQ(s.bytes, bytes) << coll_name(k) << " rank " << r;
      EXPECT_GE(s.seconds, 0.0) << coll_name(k);
    };
    expect(CollKind::AllReduce, 2, 840);
    expect(CollKind::AllGather, 1, 10);
    expect(CollKind::ReduceScatter, 1, n * 32);
    expect(CollKind::Broadcast, 1, r == 1 ? 28 : 0);
    expect(CollKind::Reduce, 1, 24);
    expect(CollKind::AllToAll, 1, 2 * (n * r + n * (n - 1) / 2));
    expect(CollKind::Send, r == 0 ? 1 : 0, r == 0 ? 18 : 0);
    expect(CollKind::Recv, r == 1 ? 1 : 0, r == 1 ? 18 : 0);
    expect(CollKind::Barrier, 2, 0);
    EXPECT_TRUE(contains(l.json(), "\"all_to_all\":{\"calls\":1,")) << l.json();
    l.reset();
    EXPECT_EQ(l.get(CollKind::AllReduce).calls, 0);
    EXPECT_EQ(l.get(CollKind::AllReduce).bytes, 0);
  }
}

TEST(Ledger, EachAxisHasItsOwn) {
  auto mesh = axes_mesh({2, 1, 1, 1, 2});
  mesh->run([&](int, int rank) {
    float x[8] = {};
    for (int i = 0; i < 3; ++i) mesh->comm(rank, "tp").all_reduce(x, x, 8, DType::F32, ReduceOp::Sum);
    mesh->comm(rank, "dp").all_reduce(x, x, 2, DType::F32, ReduceOp::Sum);
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(mesh->comm(r, "tp").ledger().get(CollKind::AllReduce).calls, 3);
    EXPECT_EQ(mesh->comm(r, "tp").ledger().get(CollKind::AllReduce).bytes, 3 * 32);
    EXPECT_EQ(mesh->comm(r, "dp").ledger().get(CollKind::AllReduce).calls, 1);
    EXPECT_EQ(mesh->comm(r, "dp").ledger().get(CollKind::AllReduce).bytes, 8);
    EXPECT_EQ(mesh->comm(r, "world").ledger().get(CollKind::AllReduce).calls, 0);
  }
}

}  // namespace
}  // namespace dt::comm::test
