// Calls that do not match between ranks, and bad arguments.
//  - Mismatched collectives (kind, dtype, count, root, op; all-to-all counts; send/recv
//    sizes) end in DT_ERR_COMM on the ranks that see them, naming the op and the rank,
//    before any data moves: no hang, and nothing read or written out of bounds (the
//    buffers are sized for each rank's own arguments, so ASan would see any overrun).
//  - Bad arguments are INVALID_ARGUMENT naming the argument, raised in communicator.cc
//    before anything moves; the world stays healthy.
#include "multirank/coll_util.h"

namespace dt::comm::test {
namespace DT_TEST_NS {

constexpr double kLong = 60;  // a mismatch must be reported at once, never by a timeout

// Runs `call` on every rank of a fresh 3-rank world, after one matching all-reduce (so
// every slot holds a stale, valid-looking entry); expects COMM on every rank whose message
// contains each of `parts`.
void expect_mismatch(const std::function<void(Communicator&, int)>& call, const std::vector<std::string>& parts) {
  auto mesh = world_mesh(3, kLong);
  auto out = run_outcomes(*mesh, [&](int rank) {
    Communicator& c = mesh->comm(rank, "world");
    auto warm = std::make_unique<float[]>(8);  // freed before the mismatched call
    c.all_reduce(warm.get(), warm.get(), 8, DType::F32, ReduceOp::Sum);
    warm.reset();
    call(c, rank);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(out[r].code, DT_ERR_COMM) << "rank " << r << ": " << out[r].what;
    for (const auto& p : parts) EXPECT_TRUE(contains(out[r].what, p)) << "rank " << r << ": " << out[r].what;
  }
}

TEST(Mismatch, Kind) {
  expect_mismatch(
      [](Communicator& c, int rank) {
        std::vector<float> a(8), b(24);
        if (rank == 2) c.all_gather(a.data(), b.data(), 8, DType::F32);
        else c.all_reduce(a.data(), a.data(), 8, DType::F32, ReduceOp::Sum);
      },
      {"rank 2 called with op all_gather vs all_reduce of rank 0", "mismatched"});
}

// A barrier against a collective: the barrier must not pass for the collective's first
// step (the collective would then read the barrier rank's stale, freed buffers).
TEST(Mismatch, BarrierAgainstACollective) {
  expect_mismatch(
      [](Communicator& c, int rank) {
        std::vector<float> a(8);
        if (rank == 1) c.barrier();
        else c.all_reduce(a.data(), a.data(), 8, DType::F32, ReduceOp::Sum);
      },
      {"rank 1 called with op barrier vs all_reduce of rank 0"});
}

TEST(Mismatch, Dtype) {
  expect_mismatch(
      [](Communicator& c, int rank) {
        std::vector<int64_t> a(8);
        c.all_reduce(a.data(), a.data(), 8, rank == 1 ? DType::I32 : DType::I64, ReduceOp::Sum);
      },
      {"all_reduce", "rank 1 called with dtype i32 vs i64"});
}

TEST(Mismatch, CountAcrossThePathSwitch) {
  // Rank 0 would take the small path, the others the large one; buffers fit each rank only.
  expect_mismatch(
      [](Communicator& c, int rank) {
        int64_t n = rank == 0 ? 16 : 50000;
        std::vector<float> a(static_cast<size_t>(n));
        c.all_reduce(a.data(), a.data(), n, DType::F32, ReduceOp::Sum);
      },
      {"all_reduce", "rank 1 called with count 50000 vs 16"});
}

TEST(Mismatch, Root) {
  expect_mismatch(
      [](Communicator& c, int rank) {
        std::vector<float> a(5);
        c.broadcast(a.data(), a.data(), 5, DType::F32, rank == 2 ? 2 : 0);
      },
      {"broadcast", "rank 2 called with root 2 vs 0"});
  expect_mismatch(
      [](Communicator& c, int rank) {
        std::vector<float> a(5), b(5);
        c.reduce(a.data(), b.data(), 5, DType::F32, ReduceOp::Sum, rank == 1 ? 1 : 2);
      },
      {"reduce", "rank 1 called with root 1 vs 2"});
}

TEST(Mismatch, ReduceOp) {
  expect_mismatch(
      [](Communicator& c, int rank) {
        std::vector<float> a(9), b(3);
        c.reduce_scatter(a.data(), b.data(), 3, DType::F32, rank == 2 ? ReduceOp::Max : ReduceOp::Sum);
      },
      {"reduce_scatter", "rank 2 called with reduce op max vs sum"});
}

TEST(Mismatch, AllToAllCounts) {
  // Rank 1 sends 2 elements to rank 2, which expects 1.
  expect_mismatch(
      [](Communicator& c, int rank) {
        std::vector<int64_t> sc{1, 1, 1}, rc{1, 1, 1};
        if (rank == 1) sc[2] = 2;
        std::vector<int32_t> s(4), r(3);
        c.all_to_all(s.data(), sc, r.data(), rc, DType::I32);
      },
      {"all_to_all on axis world: rank 1 sends 2 elements to rank 2, which expects 1"});
}

// A receive that expects another size than was sent fails on the receiver, and the
// sender's next wait reports it too.
TEST(Mismatch, SendRecvSizeAndDtype) {
  for (bool dtype : {false, true}) {
    auto mesh = world_mesh(2, kLong);
    auto out = run_outcomes(*mesh, [&](int rank) {
      Communicator& c = mesh->comm(rank, "world");
      std::vector<float> buf(6);
      if (rank == 0) c.send(buf.data(), dtype ? 4 : 6, dtype ? DType::I32 : DType::F32, 1, 2);
      else c.recv(buf.data(), 4, DType::F32, 0, 2);
      c.barrier();
    });
    EXPECT_EQ(out[1].code, DT_ERR_COMM) << out[1].what;
    EXPECT_TRUE(contains(out[1].what, dtype ? "rank 0 sent 4 i32 elements (tag 2); rank 1 expected 4 f32"
                                            : "rank 0 sent 6 f32 elements (tag 2); rank 1 expected 4 f32"))
        << out[1].what;
    EXPECT_NE(out[0].code, DT_OK);
    EXPECT_NE(out[0].code, DT_ERR_TIMEOUT) << out[0].what;
  }
}

// ---- bad arguments ------------------------------------------------------------------------

int64_t c_calls(Communicator& c) {
  int64_t calls = 0;
  for (int k = 0; k < kNumCollKinds; ++k) calls += c.ledger().get(static_cast<CollKind>(k)).calls;
  return calls;
}

// Every rank makes the same bad call, gets INVALID_ARGUMENT mentioning `arg`, and then a
// good all-reduce still works: validation fails nothing but the call.
void expect_invalid(const std::function<void(Communicator&, int)>& call, const std::string& arg) {
  auto mesh = world_mesh(2, kLong);
  std::vector<Outcome> errs(2);
  std::vector<int32_t> after(2);
  mesh->run([&](int, int rank) {
    Communicator& c = mesh->comm(rank, "world");
    try {
      call(c, rank);
    } catch (const Error& e) {
      errs[rank] = {e.code(), e.what(), 0};
    }
    int32_t x = 1;
    c.all_reduce(&x, &x, 1, DType::I32, ReduceOp::Sum);
    after[rank] = x;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(errs[r].code, DT_ERR_INVALID_ARGUMENT) << arg << ": " << errs[r].what;
    EXPECT_TRUE(contains(errs[r].what, arg)) << errs[r].what;
    EXPECT_EQ(after[r], 2);
    EXPECT_EQ(c_calls(mesh->comm(r, "world")), 1) << "a rejected call must not reach the backend";
  }
}

TEST(BadArgument, NegativeCount) {
  float a[4];
  expect_invalid([&](Communicator& c, int) { c.all_reduce(a, a, -1, DType::F32, ReduceOp::Sum); },
                 "all_reduce: count = -1; accepted: >= 0");
  expect_invalid([&](Communicator& c, int) { c.all_gather_async(a, a, -3, DType::F32); }, "all_gather: count = -3");
}

TEST(BadArgument, NullBufferWithElements) {
  float a[8];
  expect_invalid([&](Communicator& c, int) { c.all_reduce(nullptr, a, 4, DType::F32, ReduceOp::Sum); },
                 "all_reduce: send is NULL");
  expect_invalid([&](Communicator& c, int) { c.reduce_scatter(a, nullptr, 2, DType::F32, ReduceOp::Sum); },
                 "reduce_scatter: recv is NULL");
  // send of broadcast and recv of reduce are checked on the root only: every rank names
  // itself the root here, so each one's call is rejected.
  expect_invalid([&](Communicator& c, int rank) { c.broadcast(nullptr, a, 2, DType::F32, rank); },
                 "broadcast: send is NULL");
  expect_invalid([&](Communicator& c, int rank) { c.reduce(a, nullptr, 2, DType::F32, ReduceOp::Sum, rank); },
                 "reduce: recv is NULL");
}

TEST(BadArgument, RootOutOfRange) {
  float a[4];
  expect_invalid([&](Communicator& c, int) { c.broadcast(a, a, 4, DType::F32, 2); },
                 "broadcast: root = 2; accepted: 0 to 1");
  expect_invalid([&](Communicator& c, int) { c.reduce(a, a, 4, DType::F32, ReduceOp::Sum, -1); },
                 "reduce: root = -1");
}

TEST(BadArgument, Peer) {
  float a[4];
  expect_invalid([&](Communicator& c, int rank) { c.send(a, 4, DType::F32, rank); }, "send: peer = ");
  expect_invalid([&](Communicator& c, int rank) { c.recv_async(a, 4, DType::F32, rank); }, "is this rank");
  expect_invalid([&](Communicator& c, int) { c.send(a, 4, DType::F32, 5); }, "send: peer = 5; accepted: 0 to 1");
}

TEST(BadArgument, AllToAllCountsAndInPlace) {
  float a[8], b[8];
  expect_invalid([&](Communicator& c, int) { c.all_to_all(a, {1, 1, 1}, b, {1, 1}, DType::F32); },
                 "all_to_all: send_counts has 3 entries; required: one per rank, 2");
  expect_invalid([&](Communicator& c, int) { c.all_to_all(a, {1, 1}, b, {1}, DType::F32); }, "recv_counts has 1");
  expect_invalid([&](Communicator& c, int) { c.all_to_all(a, {1, -1}, b, {1, 1}, DType::F32); },
                 "send_counts[1] = -1");
  expect_invalid([&](Communicator& c, int) { c.all_to_all(a, {2, 2}, a, {2, 2}, DType::F32); }, "never in place");
}

TEST(BadArgument, DtypeAndOp) {
  float a[4];
  expect_invalid([&](Communicator& c, int) { c.all_reduce(a, a, 4, static_cast<DType>(99), ReduceOp::Sum); },
                 "all_reduce: dtype is unknown");
  expect_invalid([&](Communicator& c, int) { c.all_reduce(a, a, 4, DType::F32, static_cast<ReduceOp>(7)); },
                 "all_reduce: op = 7");
}

}  // namespace
}  // namespace dt::comm::test
