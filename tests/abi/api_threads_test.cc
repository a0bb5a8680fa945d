// Distinct handles are independent: host threads creating, filling, multiplying and
// destroying their own tensors at once leave the ledger exactly where it started.
#include <dtrain/dtrain.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace DT_TEST_NS {

TEST(Threads, ConcurrentHostThreadsOnDistinctHandles) {
  int64_t before = 0;
  ASSERT_EQ(dt_memory_stats("cpu", DT_MEM_ALL, &before, nullptr), DT_OK);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &failures] {
      for (int rep = 0; rep < 20; ++rep) {
        int64_t s[2] = {32 + t, 48};
        int64_t sw[2] = {48, 16};
        int64_t so[2] = {32 + t, 16};
        dt_tensor *x = nullptr, *w = nullptr, *y = nullptr;
        bool ok = dt_tensor_create(DT_F32, s, 2, "cpu", nullptr, &x) == DT_OK &&
                  dt_tensor_create(DT_BF16, sw, 2, "cpu", nullptr, &w) == DT_OK &&
                  dt_tensor_create(DT_F32, so, 2, "cpu", nullptr, &y) == DT_OK &&
                  dt_tensor_fill_normal(x, 1, "x", 0, 0, 1) == DT_OK &&
                  dt_tensor_fill_normal(w, 1, "w", 0, 0, 1) == DT_OK;
        dt_tensor* w32 = nullptr;
        ok = ok && dt_tensor_create(DT_F32, sw, 2, "cpu", nullptr, &w32) == DT_OK && dt_tensor_copy(w, w32) == DT_OK &&
             dt_matmul(x, w32, 0, 0, y) == DT_OK;
        // A bad call on this thread must not disturb the others.
        int64_t bad[1] = {-1};
        dt_tensor* none = nullptr;
        ok = ok && dt_tensor_create(DT_F32, bad, 1, "cpu", nullptr, &none) == DT_ERR_INVALID_ARGUMENT;
        if (!ok) failures++;
        for (dt_tensor* h : {x, w, y, w32}) dt_tensor_destroy(h);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  int64_t after = 0;
  ASSERT_EQ(dt_memory_stats("cpu", DT_MEM_ALL, &after, nullptr), DT_OK);
  EXPECT_EQ(after, before);
}

}  // namespace
