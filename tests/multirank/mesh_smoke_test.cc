// A first look at the mesh and the local backend: all-reduce on every axis, and faults.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "comm/mesh.h"
#include "core/error.h"

namespace dt::comm {
namespace DT_TEST_NS {

std::shared_ptr<Mesh> local_mesh(Coords axes, double timeout_s = 10) {
  BackendOptions o;
  o.timeout_s = timeout_s;
  return Mesh::create("local", axes, o);
}

TEST(MeshSmoke, AllReduceOverEachAxis) {
  auto mesh = local_mesh({2, 1, 1, 1, 2});  // dp=2, tp=2
  ASSERT_EQ(mesh->world_size(), 4);
  EXPECT_EQ(mesh->group_members(1, "dp"), (std::vector<int>{1, 3}));
  EXPECT_EQ(mesh->group_members(1, "tp"), (std::vector<int>{0, 1}));
  EXPECT_EQ(mesh->group_members(1, "tp*dp"), (std::vector<int>{0, 1, 2, 3}));
  std::vector<std::vector<float>> out(4);
  mesh->run([&](int, int rank) {
    std::vector<float> big(100000, static_cast<float>(rank + 1)), small(5, static_cast<float>(rank + 1));
    mesh->comm(rank, "dp").all_reduce(big.data(), big.data(), big.size(), DType::F32, ReduceOp::Sum);
    mesh->comm(rank, "tp").all_reduce(small.data(), small.data(), small.size(), DType::F32, ReduceOp::Max);
    out[rank] = {big[0], big[99999], small[0]};
  });
  EXPECT_EQ(out[0], (std::vector<float>{4, 4, 2}));  // dp group {0,2}: 1+3; tp group {0,1}: max(1,2)
  EXPECT_EQ(out[3], (std::vector<float>{6, 6, 4}));  // dp group {1,3}: 2+4; tp group {2,3}: max(3,4)
}

TEST(MeshSmoke, MissingRankTimesOutNamingIt) {
  auto mesh = local_mesh({3, 1, 1, 1, 1}, 0.5);
  auto t0 = std::chrono::steady_clock::now();
  try {
    mesh->run([&](int, int rank) {
      if (rank == 2) {  // never joins, but stays alive past the deadline
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        return;
      }
      float x = 1;
      mesh->comm(rank, "dp").all_reduce(&x, &x, 1, DType::F32, ReduceOp::Sum);
    });
    FAIL() << "expected a timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DT_ERR_TIMEOUT) << e.what();
    EXPECT_NE(std::string(e.what()).find("all_reduce on axis dp"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[2]"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.5);
  EXPECT_THROW(mesh->run([](int, int) {}), Error);  // the mesh stays failed
}

}  // namespace
}  // namespace dt::comm
