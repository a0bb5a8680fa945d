// main() of the MPI tests: the host initializes MPI (so the library must neither initialize
// nor finalize it), only rank 0 prints gtest's report (other ranks print their failures),
// and every rank exits with the same status.
#include <cstdio>
#include <cstring>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "mpi/mpi_test_util.h"

namespace dt::comm::mpitest {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

void MpiTest::TearDown() {
  const int n = world_size(), me = world_rank();
  int mine = HasFailure() ? 1 : 0;
  std::vector<int> all(n);
  MPI_Allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::string others;
  for (int p = 0; p < n; ++p)
    if (all[p] && p != me) others += " " + std::to_string(p);
  if (!others.empty()) ADD_FAILURE() << "rank(s)" << others << " failed this test (see their output)";
}

std::shared_ptr<Mesh> mpi_mesh(Coords axes, double timeout_s, bool check_args) {
  BackendOptions o;
  o.timeout_s = timeout_s;
  o.check_args = check_args;
  return Mesh::create("mpi", axes, o);
}

void store(DType t, void* p, int64_t i, double v) {
  switch (t) {
    case DType::F32: static_cast<float*>(p)[i] = static_cast<float>(v); return;
    case DType::BF16: static_cast<uint16_t*>(p)[i] = f32_to_bf16_bits(static_cast<float>(v)); return;
    case DType::F16: static_cast<uint16_t*>(p)[i] = f32_to_f16_bits(static_cast<float>(v)); return;
    case DType::I32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); return;
    case DType::I64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); return;
  }
}

double load(DType t, const void* p, int64_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(p)[i];
    case DType::BF16: return bf16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::F16: return f16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::I32: return static_cast<const int32_t*>(p)[i];
    case DType::I64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
  }
  return 0;
}

std::vector<char> make_buffer(DType t, int64_t count, const std::function<double(int64_t)>& value) {
  std::vector<char> b(static_cast<size_t>(count) * dtype_size(t));
  for (int64_t i = 0; i < count; ++i) store(t, b.data(), i, value(i));
  return b;
}

int64_t first_difference(DType t, const std::vector<char>& a, const std::vector<char>& b) {
  const size_t esz = dtype_size(t);
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); i += esz)
    if (std::memcmp(a.data() + i, b.data() + i, esz) != 0) return static_cast<int64_t>(i / esz);
  return -1;
}

}  // namespace dt::comm::mpitest

namespace {

// Ranks other than 0 report only their failures, prefixed with their rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.message());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  const int rank = dt::comm::mpitest::world_rank();
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  int status = RUN_ALL_TESTS();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {  // the library must never finalize an MPI the host started
    std::fprintf(stderr, "[rank %d] MPI was finalized by libdtrain\n", rank);
    return 1;
  }
  int any = 0;
  MPI_Allreduce(&status, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
