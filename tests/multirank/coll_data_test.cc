// The data-moving collectives on the local backend: all-gather, broadcast (every root),
// all-to-all (equal and uneven splits, zero counts), send/recv and barrier, for every dtype
// and world sizes 1..8, checked bitwise against what each rank must hold.
#include <atomic>

#include "multirank/coll_util.h"

namespace dt::comm::test {
namespace DT_TEST_NS {

class Data : public ::testing::TestWithParam<int> {};

TEST_P(Data, AllGather) {
  const int n = GetParam();
  auto mesh = world_mesh(n);
  uint64_t seed = 1;
  for (DType t : kDTypes)
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{1001}})
      for (bool in_place : {false, true}) {
        std::vector<Bytes> in(n);
        Bytes want;
        for (int r = 0; r < n; ++r) {
          in[r] = make_input(t, count, r, seed);
          want.insert(want.end(), in[r].begin(), in[r].end());
        }
        ++seed;
        std::vector<Bytes> got(n);
        mesh->run([&](int, int rank) {
          Communicator& comm = mesh->comm(rank, "world");
          Bytes recv(want.size(), 0xA5);
          if (in_place) {  // this rank's piece already sits at its place in recv
            std::copy(in[rank].begin(), in[rank].end(), recv.begin() + rank * count * esize(t));
            comm.all_gather(recv.empty() ? nullptr : recv.data() + rank * count * esize(t), ptr(recv), count, t);
          } else {
            Bytes send = in[rank];
            comm.all_gather(ptr(send), ptr(recv), count, t);
          }
          got[rank] = recv;
        });
        for (int r = 0; r < n; ++r)
          EXPECT_EQ(bitwise_diff(t, got[r], want), "")
              << "all_gather n=" << n << " " << dtype_name(t) << " count=" << count << " in_place=" << in_place
              << " rank " << r;
      }
}

TEST_P(Data, BroadcastFromEveryRoot) {
  const int n = GetParam();
  auto mesh = world_mesh(n);
  uint64_t seed = 1000;
  for (DType t : kDTypes)
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{50003}})
      for (int root = 0; root < n; ++root) {
        const Bytes want = make_input(t, count, root, seed++);
        const bool in_place = (root + count) % 2 == 0;  // at the root: send == recv
        std::vector<Bytes> got(n);
        mesh->run([&](int, int rank) {
          Communicator& comm = mesh->comm(rank, "world");
          Bytes recv(want.size(), 0xA5);
          if (rank != root) {
            comm.broadcast(nullptr, ptr(recv), count, t, root);  // send is read on the root only
          } else if (in_place) {
            recv = want;
            comm.broadcast(ptr(recv), ptr(recv), count, t, root);
          } else {
            Bytes send = want;
            comm.broadcast(ptr(send), ptr(recv), count, t, root);
          }
          got[rank] = recv;
        });
        for (int r = 0; r < n; ++r)
          EXPECT_EQ(bitwise_diff(t, got[r], want), "")
              << "broadcast n=" << n << " " << dtype_name(t) << " count=" << count << " root=" << root << " rank " << r;
      }
}

// counts[r][p]: what rank r sends to rank p. Rank r must receive, packed in peer order,
// the block each peer p addressed to it.
void check_all_to_all(Mesh& mesh, DType t, const std::vector<std::vector<int64_t>>& counts, uint64_t seed) {
  const int n = mesh.world_size();
  std::vector<Bytes> in(n), want(n);
  std::vector<std::vector<int64_t>> offset(n, std::vector<int64_t>(n + 1, 0));
  for (int r = 0; r < n; ++r) {
    for (int p = 0; p < n; ++p) offset[r][p + 1] = offset[r][p] + counts[r][p];
    in[r] = make_input(t, offset[r][n], r, seed);
  }
  for (int r = 0; r < n; ++r)
    for (int p = 0; p < n; ++p) {
      Bytes piece = slice(in[p], t, offset[p][r], offset[p][r + 1]);
      want[r].insert(want[r].end(), piece.begin(), piece.end());
    }
  std::vector<Bytes> got(n);
  mesh.run([&](int, int rank) {
    std::vector<int64_t> recv_counts(n);
    for (int p = 0; p < n; ++p) recv_counts[p] = counts[p][rank];
    Bytes send = in[rank], recv(want[rank].size(), 0xA5);
    mesh.comm(rank, "world").all_to_all(ptr(send), counts[rank], ptr(recv), recv_counts, t);
    got[rank] = recv;
  });
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(bitwise_diff(t, got[r], want[r]), "") << "all_to_all n=" << n << " " << dtype_name(t) << " rank " << r;
}

TEST_P(Data, AllToAllEqualSplits) {
  const int n = GetParam();
  auto mesh = world_mesh(n);
  uint64_t seed = 2000;
  for (DType t : kDTypes)
    for (int64_t c : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{2049}})
      check_all_to_all(*mesh, t, std::vector<std::vector<int64_t>>(n, std::vector<int64_t>(n, c)), seed++);
}

TEST_P(Data, AllToAllUnevenSplitsWithZeros) {
  const int n = GetParam();
  auto mesh = world_mesh(n);
  uint64_t seed = 3000;
  for (DType t : kDTypes)
    for (int pattern = 0; pattern < 3; ++pattern) {
      std::vector<std::vector<int64_t>> counts(n, std::vector<int64_t>(n));
      for (int r = 0; r < n; ++r)
        for (int p = 0; p < n; ++p) {
          uint64_t h = mix(seed * 31 + static_cast<uint64_t>(r * n + p));
          // pattern 0: 0..4 (many zeros), 1: one rank sends nothing at all, 2: large and skewed
          if (pattern == 0) counts[r][p] = static_cast<int64_t>(h % 5);
          else if (pattern == 1) counts[r][p] = r == n / 2 ? 0 : static_cast<int64_t>(h % 7);
          else counts[r][p] = p == 0 ? 0 : static_cast<int64_t>(h % 3000);
        }
      check_all_to_all(*mesh, t, counts, seed++);
    }
}

// A ring: every rank passes a message to the next. Blocking calls in an order that no
// implementation can deadlock on (even ranks send first, odd ranks receive first).
TEST_P(Data, SendRecvRing) {
  const int n = GetParam();
  if (n == 1) GTEST_SKIP() << "a peer must differ from this rank";
  auto mesh = world_mesh(n);
  for (DType t : kDTypes)
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{5000}}) {
      std::vector<Bytes> in(n), got(n);
      for (int r = 0; r < n; ++r) in[r] = make_input(t, count, r, 4000 + count);
      mesh->run([&](int, int rank) {
        Communicator& comm = mesh->comm(rank, "world");
        int next = (rank + 1) % n, prev = (rank + n - 1) % n;
        Bytes send = in[rank], recv(send.size(), 0xA5);
        if (rank % 2 == 0) {
          comm.send(ptr(send), count, t, next);
          comm.recv(ptr(recv), count, t, prev);
        } else {
          comm.recv(ptr(recv), count, t, prev);
          comm.send(ptr(send), count, t, next);
        }
        got[rank] = recv;
      });
      for (int r = 0; r < n; ++r)
        EXPECT_EQ(bitwise_diff(t, got[r], in[(r + n - 1) % n]), "") << "ring n=" << n << " " << dtype_name(t)
                                                                      << " count=" << count << " rank " << r;
    }
}

// The MPI idiom: post the send asynchronously, receive, then wait. Every rank sends
// first, so this needs a send that does not hold up the receive queued behind it.
TEST_P(Data, SendAsyncThenRecvRing) {
  const int n = GetParam();
  if (n == 1) GTEST_SKIP() << "a peer must differ from this rank";
  auto mesh = world_mesh(n, 20);
  std::vector<std::vector<int32_t>> got(n);
  mesh->run([&](int, int rank) {
    Communicator& comm = mesh->comm(rank, "world");
    std::vector<int32_t> send(100, rank), recv(100, -1);
    WorkPtr w = comm.send_async(send.data(), 100, DType::I32, (rank + 1) % n);
    comm.recv(recv.data(), 100, DType::I32, (rank + n - 1) % n);
    w->wait();
    got[rank] = recv;
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(got[r], std::vector<int32_t>(100, (r + n - 1) % n)) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(World, Data, ::testing::Range(1, 9),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

// Several messages between one pair: per tag they arrive in the order sent, and a receive
// picks its tag's message whatever the order of tags on the wire.
TEST(SendRecv, OrderPerTagAndMatchingByTag) {
  auto mesh = world_mesh(2, 20);
  std::vector<std::vector<int64_t>> got;
  mesh->run([&](int, int rank) {
    Communicator& comm = mesh->comm(rank, "world");
    if (rank == 0) {
      // tag 1: 10, 11, 12; tag 2: 20, 21; interleaved on the wire
      const int64_t v[5] = {10, 20, 11, 21, 12};
      const int tags[5] = {1, 2, 1, 2, 1};
      std::vector<WorkPtr> works;
      for (int i = 0; i < 5; ++i) works.push_back(comm.send_async(&v[i], 1, DType::I64, 1, tags[i]));
      for (auto& w : works) w->wait();
    } else {
      // All of tag 2 first, then tag 1.
      for (int tag : {2, 2, 1, 1, 1}) {
        int64_t x = -1;
        comm.recv(&x, 1, DType::I64, 0, tag);
        got.push_back({tag, x});
      }
    }
  });
  EXPECT_EQ(got, (std::vector<std::vector<int64_t>>{{2, 20}, {2, 21}, {1, 10}, {1, 11}, {1, 12}}));
}

TEST(SendRecv, ManyBlockingMessagesKeepTheirOrder) {
  auto mesh = world_mesh(3);
  std::vector<int32_t> got;
  mesh->run([&](int, int rank) {
    Communicator& comm = mesh->comm(rank, "world");
    for (int i = 0; i < 50; ++i) {
      if (rank == 2) {
        int32_t v = i * 7;
        comm.send(&v, 1, DType::I32, 0, /*tag=*/3);
      } else if (rank == 0) {
        int32_t x = -1;
        comm.recv(&x, 1, DType::I32, 2, 3);
        got.push_back(x);
      }
    }
  });
  ASSERT_EQ(got.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(got[i], i * 7);
}

// Nobody leaves a barrier before everybody has entered it, over many rounds.
TEST(Barrier, NoRankLeavesEarly) {
  for (int n : {1, 2, 5, 8}) {
    auto mesh = world_mesh(n);
    constexpr int kRounds = 100;
    std::vector<std::atomic<int>> arrived(kRounds);
    for (auto& a : arrived) a = 0;
    std::atomic<int> early{0};
    mesh->run([&](int, int rank) {
      Jitter jitter(static_cast<uint64_t>(rank) + 17);
      Communicator& comm = mesh->comm(rank, "world");
      for (int k = 0; k < kRounds; ++k) {
        jitter();
        arrived[k].fetch_add(1);
        comm.barrier();
        if (arrived[k].load() != n) early.fetch_add(1);
      }
    });
    EXPECT_EQ(early.load(), 0) << "n=" << n;
  }
}

}  // namespace
}  // namespace dt::comm::test
