// The blocking pool: every index exactly once, nesting runs serially, sizes change safely.
#include <atomic>
#include <cstdlib>
#include <vector>

#include "core/env.h"
#include "core/thread_pool.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << n << " " << i;
    }
  }
}

TEST(ThreadPool, GrainLimitsTheNumberOfChunks) {
  ThreadPool pool(4);
  std::atomic<int> chunks{0};
  pool.parallel_for(100, 60, [&](int64_t, int64_t) { chunks++; });
  EXPECT_EQ(chunks.load(), 1);
}

TEST(ThreadPool, NestedCallsRunSeriallyWithoutDeadlock) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  pool.parallel_for(6, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      pool.parallel_for(10, 1, [&](int64_t a, int64_t b) { total += b - a; });
  });
  EXPECT_EQ(total.load(), 60);
}

TEST(ThreadPool, ManyJobsInARow) {
  ThreadPool pool(2);
  int64_t sum = 0;
  for (int rep = 0; rep < 2000; ++rep) {
    std::atomic<int64_t> s{0};
    pool.parallel_for(64, 1, [&](int64_t lo, int64_t hi) { s += hi - lo; });
    sum += s;
  }
  EXPECT_EQ(sum, 2000 * 64);
}

TEST(ThreadPool, KernelPoolSizeFollowsTheSetting) {
  int keep = kernel_threads();
  set_kernel_threads(3);
  EXPECT_EQ(kernel_pool().size(), 3);
  set_kernel_threads(1);
  EXPECT_EQ(kernel_pool().size(), 1);
  set_kernel_threads(keep);
}

// Tuning knobs (DTRAIN_POOL_SPIN_US, DTRAIN_CPU_BF16_GEMM) read through env_int: a value
// in range is taken; unset, malformed or out of range gives the default, never an error.
TEST(EnvKnob, TakesAnIntegerInRangeAndFallsBackOtherwise) {
  const char* name = "DTRAIN_TEST_KNOB_FOR_ENV_INT";
  ::unsetenv(name);
  EXPECT_EQ(env_int(name, 50, 0, 100), 50);
  for (auto [value, want] : std::vector<std::pair<const char*, int64_t>>{
           {"0", 0}, {"100", 100}, {"7", 7}, {"101", 50}, {"-1", 50}, {"", 50}, {"12us", 50}, {"abc", 50}}) {
    ::setenv(name, value, 1);
    EXPECT_EQ(env_int(name, 50, 0, 100), want) << "'" << value << "'";
  }
  ::unsetenv(name);
}

}  // namespace
}  // namespace dt
