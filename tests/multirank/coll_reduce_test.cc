// The reducing collectives (all-reduce, reduce-scatter, reduce) on the local backend,
// against the rank-order f32 reference, bitwise, in place and out of place.
//
// Coverage is split so the count stays manageable: every dtype x every op at world sizes
// 1, 3 and 4 (odd and even; sizes not divisible by either), and every world size 1..8 for
// f32 sum. Sizes include 0, 1, 3, a count that no world size divides, the 16 KiB boundary
// of all-reduce's small path, and 50003 elements (the reduce-scatter + all-gather path).
#include "multirank/coll_util.h"

namespace dt::comm::test {
namespace DT_TEST_NS {

enum class Kind { AllReduce, ReduceScatter, Reduce };

struct Case {
  Kind kind;
  DType dtype;
  ReduceOp op;
  int64_t count;  // all-reduce, reduce: the buffer; reduce-scatter: the block per rank
  bool in_place;
  int root = 0;
};

std::string describe(const Case& c, int n) {
  static const char* const kinds[] = {"all_reduce", "reduce_scatter", "reduce"};
  return std::string(kinds[static_cast<int>(c.kind)]) + " n=" + std::to_string(n) + " " + dtype_name(c.dtype) + " " +
         kernels::reduce_op_name(c.op) + " count=" + std::to_string(c.count) + (c.in_place ? " in place" : "") +
         (c.kind == Kind::Reduce ? " root=" + std::to_string(c.root) : "");
}

// Runs one case on every rank of `mesh` and checks every rank's output bitwise.
void run_case(Mesh& mesh, const Case& c, uint64_t seed) {
  const int n = mesh.world_size();
  const DType t = c.dtype;
  const int64_t total = c.kind == Kind::ReduceScatter ? c.count * n : c.count;
  std::vector<Bytes> in(n);
  for (int r = 0; r < n; ++r) in[r] = make_input(t, total, r, seed, c.op);
  const Bytes want = reference(t, c.op, in, 0, total);
  const Bytes sentinel(static_cast<size_t>(c.count * esize(t)), 0xA5);  // what a non-root's recv must keep

  std::vector<Bytes> got(n), send_after(n);
  mesh.run([&](int, int rank) {
    Communicator& comm = mesh.comm(rank, "world");
    Bytes send = in[rank];
    Bytes recv = sentinel;
    switch (c.kind) {
      case Kind::AllReduce:
        if (c.in_place) {
          comm.all_reduce(ptr(send), ptr(send), c.count, t, c.op);
          got[rank] = send;
        } else {
          comm.all_reduce(ptr(send), ptr(recv), c.count, t, c.op);
          got[rank] = recv;
        }
        break;
      case Kind::ReduceScatter:
        if (c.in_place) {  // the block of this rank, inside send
          void* mine = send.empty() ? nullptr : send.data() + rank * c.count * esize(t);
          comm.reduce_scatter(ptr(send), mine, c.count, t, c.op);
          got[rank] = slice(send, t, rank * c.count, (rank + 1) * c.count);
        } else {
          comm.reduce_scatter(ptr(send), ptr(recv), c.count, t, c.op);
          got[rank] = recv;
        }
        break;
      case Kind::Reduce:
        // recv is ignored away from the root: pass null there when in place, a sentinel
        // buffer (which must come back untouched) otherwise.
        if (c.in_place) {
          comm.reduce(ptr(send), rank == c.root ? ptr(send) : nullptr, c.count, t, c.op, c.root);
          got[rank] = rank == c.root ? send : sentinel;
        } else {
          comm.reduce(ptr(send), ptr(recv), c.count, t, c.op, c.root);
          got[rank] = recv;
        }
        break;
    }
    if (!c.in_place) send_after[rank] = send;
  });

  for (int r = 0; r < n; ++r) {
    Bytes expect = want;
    if (c.kind == Kind::ReduceScatter) expect = slice(want, t, r * c.count, (r + 1) * c.count);
    if (c.kind == Kind::Reduce && r != c.root) expect = sentinel;
    std::string d = bitwise_diff(t, got[r], expect);
    EXPECT_EQ(d, "") << describe(c, n) << ", rank " << r;
    // Out of place, the send buffer is input only.
    if (!c.in_place) EXPECT_EQ(bitwise_diff(t, send_after[r], in[r]), "") << describe(c, n) << ": send changed";
  }
}

const int64_t kMatrixSizes[] = {0, 1, 3, 10, 50003};

class DtypeOpMatrix : public ::testing::TestWithParam<int> {};

TEST_P(DtypeOpMatrix, AllReduce) {
  auto mesh = world_mesh(GetParam());
  uint64_t seed = 1;
  for (DType t : kDTypes)
    for (ReduceOp op : kOps)
      for (int64_t count : kMatrixSizes)
        for (bool in_place : {false, true}) run_case(*mesh, {Kind::AllReduce, t, op, count, in_place}, seed++);
}

TEST_P(DtypeOpMatrix, ReduceScatter) {
  auto mesh = world_mesh(GetParam());
  uint64_t seed = 100000;
  for (DType t : kDTypes)
    for (ReduceOp op : kOps)
      for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{12501}})
        for (bool in_place : {false, true}) run_case(*mesh, {Kind::ReduceScatter, t, op, count, in_place}, seed++);
}

// The root rotates through the cases (every root meets every dtype and op; the roots of
// every world size get their own test below), in place and out of place in turn.
TEST_P(DtypeOpMatrix, ReduceRotatingRoot) {
  const int n = GetParam();
  auto mesh = world_mesh(n);
  uint64_t seed = 200000;
  for (DType t : kDTypes)
    for (ReduceOp op : kOps)
      for (int64_t count : kMatrixSizes) {
        int root = static_cast<int>(seed % n);
        run_case(*mesh, {Kind::Reduce, t, op, count, /*in_place=*/(seed / n) % 2 == 0, root}, seed);
        ++seed;
      }
}

INSTANTIATE_TEST_SUITE_P(World, DtypeOpMatrix, ::testing::Values(1, 3, 4),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

// Every world size, f32 sum, with sizes around each world size's block split and around
// all-reduce's 16 KiB switch (4096 f32 = 16 KiB is the small path, 4097 the large one).
class WorldSizes : public ::testing::TestWithParam<int> {};

TEST_P(WorldSizes, AllReduceF32Sum) {
  const int n = GetParam();
  auto mesh = world_mesh(n);
  uint64_t seed = 300000;
  for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{n - 1}, int64_t{n + 1}, int64_t{4 * n + 3},
                        int64_t{4096}, int64_t{4097}, int64_t{50003}})
    for (bool in_place : {false, true})
      run_case(*mesh, {Kind::AllReduce, DType::F32, ReduceOp::Sum, count, in_place}, seed++);
}

TEST_P(WorldSizes, AllReduceHalfAcrossThePathSwitch) {
  // 8192 bf16/f16 elements are 16 KiB (small path), 8193 are past it.
  auto mesh = world_mesh(GetParam());
  uint64_t seed = 350000;
  for (DType t : {DType::BF16, DType::F16})
    for (int64_t count : {int64_t{8192}, int64_t{8193}})
      run_case(*mesh, {Kind::AllReduce, t, ReduceOp::Sum, count, false}, seed++);
}

TEST_P(WorldSizes, ReduceScatterF32Sum) {
  auto mesh = world_mesh(GetParam());
  uint64_t seed = 400000;
  for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{7}, int64_t{6251}})
    for (bool in_place : {false, true})
      run_case(*mesh, {Kind::ReduceScatter, DType::F32, ReduceOp::Sum, count, in_place}, seed++);
}

TEST_P(WorldSizes, ReduceF32SumToEveryRoot) {
  const int n = GetParam();
  auto mesh = world_mesh(n);
  uint64_t seed = 500000;
  for (int root = 0; root < n; ++root)
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{n + 1}, int64_t{50003}})
      for (bool in_place : {false, true})
        run_case(*mesh, {Kind::Reduce, DType::F32, ReduceOp::Sum, count, in_place, root}, seed++);
}

INSTANTIATE_TEST_SUITE_P(World, WorldSizes, ::testing::Range(1, 9),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

// The reference itself folds in rank order: with these inputs a different order gives
// different bits, so the bitwise checks above would notice a reordered fold.
TEST(Reference, FoldOrderIsVisible) {
  std::vector<Bytes> in(3);
  const float v[3] = {1.0f, 1e8f, -1e8f};  // rank order: (1 + 1e8) - 1e8 = 0; reversed: 1
  for (int r = 0; r < 3; ++r) in[r] = Bytes(reinterpret_cast<const unsigned char*>(&v[r]),
                                            reinterpret_cast<const unsigned char*>(&v[r]) + 4);
  float got;
  std::memcpy(&got, reference(DType::F32, ReduceOp::Sum, in, 0, 1).data(), 4);
  EXPECT_EQ(got, 0.0f);
}

}  // namespace
}  // namespace dt::comm::test
