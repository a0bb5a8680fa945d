// Shared by the MPI tests. Every process of `mpirun -np N` runs the same tests in the same
// order; a test passes only when it passes on every rank (MpiTest::TearDown agrees on it
// over the host's MPI_COMM_WORLD, which the library never uses).
#pragma once
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/mesh.h"

namespace dt::comm::mpitest {

int world_rank();
int world_size();

class MpiTest : public ::testing::Test {
 protected:
  void TearDown() override;  // fails the test on every rank when it failed on any
};

// A mesh over the MPI backend; dp = 0 means the world size over the other axes.
std::shared_ptr<Mesh> mpi_mesh(Coords axes = {0, 1, 1, 1, 1}, double timeout_s = 60, bool check_args = true);

// Buffers of any dtype, written and read through doubles (exact for the small integers the
// tests use, so results can be compared bit for bit).
void store(DType t, void* p, int64_t i, double v);
double load(DType t, const void* p, int64_t i);
std::vector<char> make_buffer(DType t, int64_t count, const std::function<double(int64_t)>& value);
// First index where a and b differ bitwise, or -1.
int64_t first_difference(DType t, const std::vector<char>& a, const std::vector<char>& b);

}  // namespace dt::comm::mpitest
