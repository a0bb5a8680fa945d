// Every collective x dtype x reduce op x size over the mpi backend, against a reference
// each rank computes locally: every rank's input is a function of (rank, index).
#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "mpi/mpi_test_util.h"

namespace dt::comm::mpitest {
namespace {

const DType kDtypes[] = {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64};
const ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod};
const int64_t kSizes[] = {0, 1, 7, 1000, 100003};

// Small integers: every partial sum or product of up to 4 ranks is exact in every dtype,
// so whatever order MPI folds in, the bits are those of the reference.
double input(int rank, int64_t i, ReduceOp op) {
  if (op == ReduceOp::Prod) {
    static const int v[5] = {1, -1, 2, 1, -2};
    return v[(rank * 3 + i * 7) % 5];
  }
  return static_cast<double>((rank * 31 + i * 17) % 33) - 16;
}

// op over ranks 0..n-1 of value(p); store() rounds it to the dtype.
double reference(ReduceOp op, DType t, int n, const std::function<double(int)>& value) {
  double acc = value(0);
  for (int p = 1; p < n; ++p) {
    double v = value(p);
    if (op == ReduceOp::Sum || op == ReduceOp::Avg) acc += v;
    if (op == ReduceOp::Max) acc = std::max(acc, v);
    if (op == ReduceOp::Min) acc = std::min(acc, v);
    if (op == ReduceOp::Prod) acc *= v;
  }
  if (op != ReduceOp::Avg) return acc;
  if (is_floating(t)) return static_cast<float>(acc) / static_cast<float>(n);  // f32, as documented
  return static_cast<double>(static_cast<int64_t>(acc) / n);                   // truncates
}

std::string label(const char* what, DType t, ReduceOp op, int64_t count, bool in_place) {
  return std::string(what) + " " + dtype_name(t) + " " + kernels::reduce_op_name(op) + " count " +
         std::to_string(count) + (in_place ? " in place" : "");
}

void expect_equal(DType t, const std::vector<char>& got, const std::vector<char>& want, const std::string& what) {
  int64_t i = first_difference(t, got, want);
  if (i < 0) return;
  if (got.size() != want.size()) {
    ADD_FAILURE() << what << ": " << got.size() << " bytes, expected " << want.size();
    return;
  }
  ADD_FAILURE() << what << ": element " << i << " is " << load(t, got.data(), i) << ", expected "
                << load(t, want.data(), i);
}

std::vector<char> slice(const std::vector<char>& b, int64_t elem, int64_t count, DType t) {
  const size_t esz = dtype_size(t);
  return std::vector<char>(b.begin() + elem * esz, b.begin() + (elem + count) * esz);
}

TEST_F(MpiTest, AllReduce) {
  auto mesh = mpi_mesh();
  const int me = world_rank(), n = world_size();
  Communicator& c = mesh->comm(me, "dp");
  int combo = 0;
  for (DType t : kDtypes)
    for (ReduceOp op : kOps)
      for (int64_t count : kSizes) {
        const bool in_place = combo++ % 2 == 1;
        auto send = make_buffer(t, count, [&](int64_t i) { return input(me, i, op); });
        std::vector<char> out(send.size());
        c.all_reduce(send.data(), in_place ? send.data() : out.data(), count, t, op);
        auto want = make_buffer(t, count, [&](int64_t i) {
          return reference(op, t, n, [&](int p) { return input(p, i, op); });
        });
        expect_equal(t, in_place ? send : out, want, label("all_reduce", t, op, count, in_place));
      }
}

TEST_F(MpiTest, ReduceScatter) {
  auto mesh = mpi_mesh();
  const int me = world_rank(), n = world_size();
  Communicator& c = mesh->comm(me, "dp");
  int combo = 0;
  for (DType t : kDtypes)
    for (ReduceOp op : kOps)
      for (int64_t count : kSizes) {
        const bool in_place = combo++ % 2 == 1;  // recv = send + rank * count
        auto send = make_buffer(t, count * n, [&](int64_t i) { return input(me, i, op); });
        std::vector<char> out(static_cast<size_t>(count) * dtype_size(t));
        void* recv = in_place ? send.data() + me * count * dtype_size(t) : out.data();
        c.reduce_scatter(send.data(), recv, count, t, op);
        auto want = make_buffer(t, count, [&](int64_t j) {
          return reference(op, t, n, [&](int p) { return input(p, me * count + j, op); });
        });
        expect_equal(t, in_place ? slice(send, me * count, count, t) : out, want,
                     label("reduce_scatter", t, op, count, in_place));
      }
}

TEST_F(MpiTest, Reduce) {
  auto mesh = mpi_mesh();
  const int me = world_rank(), n = world_size();
  Communicator& c = mesh->comm(me, "dp");
  int combo = 0;
  for (DType t : kDtypes)
    for (ReduceOp op : kOps)
      for (int64_t count : kSizes) {
        const int root = combo % n;
        const bool in_place = combo++ % 2 == 1 && me == root;
        auto send = make_buffer(t, count, [&](int64_t i) { return input(me, i, op); });
        std::vector<char> out(send.size());
        void* recv = me != root ? nullptr : in_place ? send.data() : out.data();  // ignored off the root
        c.reduce(send.data(), recv, count, t, op, root);
        if (me != root) continue;
        auto want = make_buffer(t, count, [&](int64_t i) {
          return reference(op, t, n, [&](int p) { return input(p, i, op); });
        });
        expect_equal(t, in_place ? send : out, want, label("reduce", t, op, count, in_place) + " root " +
                                                         std::to_string(root));
      }
}

TEST_F(MpiTest, AllGather) {
  auto mesh = mpi_mesh();
  const int me = world_rank(), n = world_size();
  Communicator& c = mesh->comm(me, "dp");
  int combo = 0;
  for (DType t : kDtypes)
    for (int64_t count : kSizes) {
      const bool in_place = combo++ % 2 == 1;  // send = recv + rank * count
      auto piece = make_buffer(t, count, [&](int64_t i) { return input(me, i, ReduceOp::Sum); });
      std::vector<char> out(piece.size() * n);
      const void* send = piece.data();
      if (in_place) {
        std::copy(piece.begin(), piece.end(), out.begin() + piece.size() * me);
        send = out.data() + piece.size() * me;
      }
      c.all_gather(send, out.data(), count, t);
      auto want = make_buffer(t, count * n, [&](int64_t k) { return input(k / count, k % count, ReduceOp::Sum); });
      expect_equal(t, out, want, label("all_gather", t, ReduceOp::Sum, count, in_place));
    }
}

TEST_F(MpiTest, Broadcast) {
  auto mesh = mpi_mesh();
  const int me = world_rank(), n = world_size();
  Communicator& c = mesh->comm(me, "dp");
  int combo = 0;
  for (DType t : kDtypes)
    for (int64_t count : kSizes) {
      const int root = combo % n;
      const bool in_place = combo++ % 2 == 1;
      auto want = make_buffer(t, count, [&](int64_t i) { return input(root, i, ReduceOp::Sum); });
      std::vector<char> send = me == root ? want : std::vector<char>();
      auto out = make_buffer(t, count, [](int64_t) { return 99; });
      std::vector<char>& recv = in_place && me == root ? send : out;
      c.broadcast(me == root ? send.data() : nullptr, recv.data(), count, t, root);
      expect_equal(t, recv, want, label("broadcast", t, ReduceOp::Sum, count, in_place) + " root " +
                                      std::to_string(root));
    }
}

// Rank src sends cnt(src, dst) elements to dst, valued src * 64 + dst * 8 + k % 8 (exact in
// every dtype).
void check_all_to_all(Communicator& c, DType t, const std::function<int64_t(int, int)>& cnt, const std::string& what) {
  const int me = c.rank(), n = c.size();
  std::vector<int64_t> sc(n), rc(n);
  std::vector<double> send_vals, want_vals;
  for (int q = 0; q < n; ++q) {
    sc[q] = cnt(me, q);
    rc[q] = cnt(q, me);
    for (int64_t k = 0; k < sc[q]; ++k) send_vals.push_back(me * 64 + q * 8 + k % 8);
    for (int64_t k = 0; k < rc[q]; ++k) want_vals.push_back(q * 64 + me * 8 + k % 8);
  }
  auto send = make_buffer(t, static_cast<int64_t>(send_vals.size()), [&](int64_t i) { return send_vals[i]; });
  auto want = make_buffer(t, static_cast<int64_t>(want_vals.size()), [&](int64_t i) { return want_vals[i]; });
  std::vector<char> out(want.size());
  c.all_to_all(send.data(), sc, out.data(), rc, t);
  expect_equal(t, out, want, what + " " + dtype_name(t));
}

TEST_F(MpiTest, AllToAllEqualAndUneven) {
  auto mesh = mpi_mesh();
  Communicator& c = mesh->comm(world_rank(), "dp");
  for (DType t : kDtypes) {
    for (int64_t count : {0, 1, 7, 1000})
      check_all_to_all(c, t, [count](int, int) { return count; }, "all_to_all equal " + std::to_string(count));
    check_all_to_all(c, t, [](int s, int d) { return (s * 2 + d) % 4; }, "all_to_all uneven small");
    check_all_to_all(c, t, [](int s, int d) { return ((s + d * 3) % 5) * 2500; }, "all_to_all uneven large");
  }
}

// Noise in [-1, 1) with all mantissa bits in use, a function of (rank, index).
float noise(int rank, int64_t i) {
  uint64_t h = (static_cast<uint64_t>(rank) << 40) ^ static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return static_cast<float>(h & 0xFFFFFF) / static_cast<float>(1 << 23) - 1.0f;
}

uint64_t fnv(const std::vector<char>& b) {
  uint64_t h = 1469598103934665603ull;
  for (char ch : b) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  return h;
}

TEST_F(MpiTest, AllReduceIsBitwiseIdenticalOnEveryRank) {
  auto mesh = mpi_mesh();
  const int me = world_rank(), n = world_size();
  Communicator& c = mesh->comm(me, "world");
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Prod})
      for (int64_t count : {1000, 100003}) {
        auto buf = make_buffer(t, count, [&](int64_t i) { return noise(me, i); });
        c.all_reduce(buf.data(), buf.data(), count, t, op);
        uint64_t mine = fnv(buf);
        std::vector<uint64_t> all(n);
        MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
        for (int p = 0; p < n; ++p)
          EXPECT_EQ(all[p], mine) << label("all_reduce", t, op, count, true) << ": rank " << p << " differs";
        // Close to the exact result of the inputs as the dtype stores them.
        const double tol = (t == DType::F32 ? 1e-5 : t == DType::F16 ? 4e-3 : 3e-2) * n;
        auto x = [&](int p, int64_t i) {
          char tmp[8];
          store(t, tmp, 0, noise(p, i));
          return load(t, tmp, 0);
        };
        int bad = 0;
        for (int64_t i = 0; i < count && bad < 3; ++i) {
          double want = x(0, i);
          for (int p = 1; p < n; ++p)
            want = op == ReduceOp::Max    ? std::max(want, x(p, i))
                   : op == ReduceOp::Prod ? want * x(p, i)
                                          : want + x(p, i);
          if (op == ReduceOp::Avg) want /= n;
          if (std::fabs(load(t, buf.data(), i) - want) > tol && ++bad)
            ADD_FAILURE() << label("all_reduce", t, op, count, true) << ": element " << i << " is "
                          << load(t, buf.data(), i) << ", expected about " << want;
        }
      }
}

TEST_F(MpiTest, MaxAndMinPropagateNaN) {
  auto mesh = mpi_mesh();
  const int me = world_rank();
  Communicator& c = mesh->comm(me, "dp");
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
      auto buf = make_buffer(t, 5, [&](int64_t i) { return i == 3 && me == 1 ? std::nan("") : i + me; });
      c.all_reduce(buf.data(), buf.data(), 5, t, op);
      EXPECT_TRUE(std::isnan(load(t, buf.data(), 3))) << dtype_name(t) << " " << kernels::reduce_op_name(op);
      EXPECT_EQ(load(t, buf.data(), 4), op == ReduceOp::Max ? 4 + world_size() - 1 : 4);
    }
}

}  // namespace
}  // namespace dt::comm::mpitest
