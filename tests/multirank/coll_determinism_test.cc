// Determinism and scheduling: results are bitwise identical on every rank and across runs
// whatever order the ranks arrive in (random, seeded delays before every call), and many
// ranks on few cores still make progress.
#include <atomic>

#include "multirank/coll_util.h"

namespace dt::comm::test {
namespace DT_TEST_NS {

// One run's outputs on one rank: every reducing path, including both all-reduce paths.
constexpr int64_t kBlock = 6001;  // reduce-scatter block per rank, f32

struct Outputs {
  Bytes small_f32, large_f32, large_bf16, scattered, reduced, gathered;
};

Outputs run_once(Mesh& mesh, const std::vector<std::vector<Bytes>>& in, int rank, uint64_t jitter_seed) {
  Communicator& comm = mesh.comm(rank, "world");
  const int n = comm.size();
  Jitter jitter(jitter_seed);
  Outputs o;
  Bytes a = in[0][rank], b = in[1][rank], c = in[2][rank], d = in[3][rank];
  jitter();
  comm.all_reduce(a.data(), a.data(), 1000, DType::F32, ReduceOp::Sum);  // small path
  o.small_f32 = a;
  jitter();
  o.large_f32.resize(b.size());
  comm.all_reduce(b.data(), o.large_f32.data(), 50003, DType::F32, ReduceOp::Sum);  // reduce-scatter + all-gather
  jitter();
  comm.all_reduce(c.data(), c.data(), 50003, DType::BF16, ReduceOp::Avg);
  o.large_bf16 = c;
  jitter();
  o.scattered.resize(kBlock * 4);
  comm.reduce_scatter(d.data(), o.scattered.data(), kBlock, DType::F32, ReduceOp::Sum);
  jitter();
  o.reduced.resize(b.size());
  comm.reduce(in[1][rank].data(), o.reduced.data(), 50003, DType::F32, ReduceOp::Sum, n - 1);
  jitter();
  o.gathered.resize(kBlock * 4 * n);
  comm.all_gather(o.scattered.data(), o.gathered.data(), kBlock, DType::F32);
  return o;
}

TEST(Determinism, BitwiseIdenticalOnEveryRankAcross100JitteredRuns) {
  const int n = 4;  // more ranks than cores: the scheduler reorders them too
  auto mesh = world_mesh(n);
  std::vector<std::vector<Bytes>> in(4, std::vector<Bytes>(n));
  for (int r = 0; r < n; ++r) {
    in[0][r] = make_input(DType::F32, 1000, r, 1);
    in[1][r] = make_input(DType::F32, 50003, r, 2);
    in[2][r] = make_input(DType::BF16, 50003, r, 3);
    in[3][r] = make_input(DType::F32, 4 * kBlock, r, 4);
  }
  // The answers, from the rank-order reference.
  const Bytes want_small = reference(DType::F32, ReduceOp::Sum, in[0], 0, 1000);
  const Bytes want_large = reference(DType::F32, ReduceOp::Sum, in[1], 0, 50003);
  const Bytes want_bf16 = reference(DType::BF16, ReduceOp::Avg, in[2], 0, 50003);
  const Bytes want_gathered = reference(DType::F32, ReduceOp::Sum, in[3], 0, 4 * kBlock);

  int mismatches = 0;
  for (int run = 0; run < 100 && mismatches < 5; ++run) {
    std::vector<Outputs> out(n);
    mesh->run([&](int, int rank) { out[rank] = run_once(*mesh, in, rank, mix(run * 131 + rank)); });
    for (int r = 0; r < n; ++r) {
      const Bytes want_block = slice(want_gathered, DType::F32, r * kBlock, (r + 1) * kBlock);
      std::string d = bitwise_diff(DType::F32, out[r].small_f32, want_small) +
                      bitwise_diff(DType::F32, out[r].large_f32, want_large) +
                      bitwise_diff(DType::BF16, out[r].large_bf16, want_bf16) +
                      bitwise_diff(DType::F32, out[r].scattered, want_block) +
                      bitwise_diff(DType::F32, out[r].gathered, want_gathered);
      if (r == n - 1) d += bitwise_diff(DType::F32, out[r].reduced, want_large);
      if (!d.empty()) ++mismatches;
      EXPECT_EQ(d, "") << "run " << run << ", rank " << r;
    }
  }
}

// Rank threads persist between run() calls; a rank that starts late in one run must not
// be taken for having left (its flag from the previous run's end).
TEST(Scheduling, ManyShortRunsInARow) {
  auto mesh = world_mesh(8);
  for (int run = 0; run < 300; ++run) {
    std::vector<int64_t> got(8, -1);
    mesh->run([&](int, int rank) {
      int64_t v = rank + run;
      mesh->comm(rank, "world").all_reduce(&v, &v, 1, DType::I64, ReduceOp::Sum);
      got[rank] = v;
    });
    for (int r = 0; r < 8; ++r) ASSERT_EQ(got[r], 28 + 8 * run) << "run " << run << ", rank " << r;
  }
}

// 8 ranks on 2 cores: a loop of small all-reduces completes (the waits yield and then
// block instead of spinning a core away from the rank that has to arrive).
TEST(Scheduling, EightRanksTwoHundredSmallAllReduces) {
  auto mesh = world_mesh(8);
  std::vector<int> wrong(8, 0);
  mesh->run([&](int, int rank) {
    Communicator& comm = mesh->comm(rank, "world");
    for (int i = 0; i < 200; ++i) {
      float v[4] = {static_cast<float>(rank), 1.0f, static_cast<float>(i), static_cast<float>(rank * i)};
      comm.all_reduce(v, v, 4, DType::F32, ReduceOp::Sum);
      if (v[0] != 28.0f || v[1] != 8.0f || v[2] != 8.0f * i || v[3] != 28.0f * i) ++wrong[rank];
    }
  });
  EXPECT_EQ(wrong, std::vector<int>(8, 0));
}

// The same under sub-communicators of both axes at once, interleaved: dp groups and tp
// groups make progress side by side on the shared cores.
TEST(Scheduling, InterleavedAxesOnEightRanks) {
  auto mesh = axes_mesh({2, 1, 1, 1, 4});  // dp=2 x tp=4
  std::atomic<int> wrong{0};
  mesh->run([&](int, int rank) {
    Jitter jitter(static_cast<uint64_t>(rank));
    for (int i = 0; i < 100; ++i) {
      int32_t tp = rank, dp = rank;
      jitter();
      mesh->comm(rank, "tp").all_reduce(&tp, &tp, 1, DType::I32, ReduceOp::Sum);
      mesh->comm(rank, "dp").all_reduce(&dp, &dp, 1, DType::I32, ReduceOp::Max);
      int tp_base = rank / 4 * 4;
      if (tp != 4 * tp_base + 6 || dp != 4 + rank % 4) wrong.fetch_add(1);
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace dt::comm::test
