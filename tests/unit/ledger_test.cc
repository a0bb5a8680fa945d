// The memory ledger after a known sequence of allocations, and the pooled allocator.
#include "core/allocator.h"
#include "core/tensor.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

struct Snapshot {
  int64_t cur[kNumMemTags + 1];
  explicit Snapshot(const Ledger& l) {
    for (int i = 0; i <= kNumMemTags; ++i) cur[i] = l.current(i);
  }
};

TEST(Ledger, CountsRequestedBytesPerTagAndPeak) {
  Ledger& l = ledger_for(Device::cpu());
  Snapshot before(l);
  l.reset_peak();
  int64_t base_peak = l.peak(DT_MEM_ALL);
  {
    Tensor p = Tensor::zeros({1000, 3}, DType::F32, Device::cpu(), MemTag::Param);      // 12000 B
    Tensor g = Tensor::zeros({1000, 3}, DType::BF16, Device::cpu(), MemTag::Grad);      // 6000 B
    Tensor m = Tensor::zeros({7}, DType::I64, Device::cpu(), MemTag::Optimizer);        // 56 B
    EXPECT_EQ(l.current(DT_MEM_PARAM) - before.cur[DT_MEM_PARAM], 12000);
    EXPECT_EQ(l.current(DT_MEM_GRAD) - before.cur[DT_MEM_GRAD], 6000);
    EXPECT_EQ(l.current(DT_MEM_OPTIMIZER) - before.cur[DT_MEM_OPTIMIZER], 56);
    EXPECT_EQ(l.current(DT_MEM_ALL) - before.cur[DT_MEM_ALL], 18056);
    {
      Tensor a = Tensor::zeros({4096}, DType::F32, Device::cpu(), MemTag::Activation);  // 16384 B
      EXPECT_EQ(l.current(DT_MEM_ACTIVATION) - before.cur[DT_MEM_ACTIVATION], 16384);
    }
    EXPECT_EQ(l.current(DT_MEM_ACTIVATION), before.cur[DT_MEM_ACTIVATION]);
    EXPECT_EQ(l.peak(DT_MEM_ACTIVATION) - before.cur[DT_MEM_ACTIVATION], 16384);
    EXPECT_EQ(l.peak(DT_MEM_ALL) - base_peak, 18056 + 16384);
    // A view shares storage: no new bytes.
    Tensor v = p.reshape({3000}).slice0(10, 20);
    EXPECT_EQ(l.current(DT_MEM_ALL) - before.cur[DT_MEM_ALL], 18056);
  }
  for (int i = 0; i <= kNumMemTags; ++i) EXPECT_EQ(l.current(i), before.cur[i]) << mem_tag_name(i);
  l.reset_peak();
  EXPECT_EQ(l.peak(DT_MEM_ALL), l.current(DT_MEM_ALL));
}

TEST(Ledger, JsonNamesEveryTag) {
  std::string j = ledger_for(Device::cpu()).json("cpu", 0);
  for (const char* tag : {"param", "grad", "optimizer", "activation", "kv_cache", "comm_buffer", "workspace"})
    EXPECT_NE(j.find(std::string("\"") + tag + "\""), std::string::npos) << tag;
}

TEST(Allocator, ReusesFreedBlocksOfTheSameClass) {
  void* first = nullptr;
  {
    Tensor a = Tensor::zeros({1 << 18}, DType::F32);  // 1 MiB
    first = a.raw();
    a.data<float>()[5] = 3.0f;
  }
  int64_t cached = pool_cached_bytes(Device::cpu());
  EXPECT_GE(cached, 1 << 20);
  Tensor b = Tensor::zeros({1 << 18}, DType::F32);
  EXPECT_EQ(b.raw(), first);                    // the same block came back
  EXPECT_EQ(b.data<float>()[5], 0.0f);          // zero-filled again
  EXPECT_EQ(pool_cached_bytes(Device::cpu()), cached - (1 << 20));
}

// Tiny blocks (a bad-index flag, a scalar sum) are made every step: they are cached like
// big ones, so a loop in steady state never goes to the system (on a GPU each cudaFree
// would synchronize the device).
TEST(Allocator, SmallBlocksAreCachedSoASteadyLoopMakesNoSystemCalls) {
  auto step = [] {
    Tensor flag = Tensor::zeros({1}, DType::I64, Device::cpu(), MemTag::Workspace);     // 8 B
    Tensor scalar = Tensor::zeros({1}, DType::F32, Device::cpu(), MemTag::Workspace);   // 4 B
    Tensor row = Tensor::zeros({300}, DType::F32, Device::cpu(), MemTag::Activation);   // 1200 B
  };
  step();  // the first step fills the cache
  PoolCounters before = pool_counters(Device::cpu());
  for (int i = 0; i < 100; ++i) step();
  PoolCounters after = pool_counters(Device::cpu());
  EXPECT_EQ(after.system_allocs, before.system_allocs);
  EXPECT_EQ(after.system_frees, before.system_frees);
  EXPECT_EQ(after.reuses - before.reuses, 300);
}

TEST(Allocator, SizeClassesWasteAtMostAQuarter) {
  EXPECT_EQ(pool_size_class(1), 64u);
  EXPECT_EQ(pool_size_class(4096), 4096u);
  for (size_t n : {4097ul, 100000ul, 1000001ul, (1ul << 30) + 1}) {
    size_t c = pool_size_class(n);
    EXPECT_GE(c, n);
    EXPECT_LE(c, n + n / 4 + 4096) << n;
  }
}

TEST(Allocator, ImpossibleAllocationIsOutOfMemoryAndTheProcessStaysHealthy) {
  try {
    Tensor t = Tensor::zeros({int64_t(1) << 43}, DType::F32);  // 32 TiB
    FAIL() << "expected OUT_OF_MEMORY";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DT_ERR_OUT_OF_MEMORY);
    EXPECT_NE(std::string(e.what()).find("cannot allocate"), std::string::npos);
  }
  Tensor ok = Tensor::zeros({1024}, DType::F32);
  EXPECT_EQ(ok.numel(), 1024);
}

TEST(Allocator, MemoryLimitIsEnforced) {
  AllocatorSettings keep = allocator_settings();
  AllocatorSettings s = keep;
  s.memory_limit_bytes = ledger_for(Device::cpu()).current(DT_MEM_ALL) + (1 << 20);
  allocator_configure(s);
  Tensor small = Tensor::zeros({1 << 10}, DType::F32);
  bool threw = false;
  try {
    Tensor big = Tensor::zeros({1 << 20}, DType::F32);  // 4 MiB > the 1 MiB headroom
  } catch (const Error& e) {
    threw = e.code() == DT_ERR_OUT_OF_MEMORY;
  }
  allocator_configure(keep);
  EXPECT_TRUE(threw);
}

TEST(Tensor, ShapeChecks) {
  EXPECT_THROW(Tensor::zeros({2, 0}, DType::F32), Error);
  EXPECT_THROW(Tensor::zeros({-3}, DType::F32), Error);
  EXPECT_THROW(Tensor::zeros({int64_t(1) << 40, int64_t(1) << 40}, DType::F32), Error);
  EXPECT_THROW(Tensor::zeros(Shape(9, 1), DType::F32), Error);
  Tensor s = Tensor::zeros({}, DType::F32);  // a scalar
  EXPECT_EQ(s.numel(), 1);
  Tensor t = Tensor::zeros({4, 6}, DType::F32);
  EXPECT_THROW(t.reshape({5, 5}), Error);
  EXPECT_THROW(t.slice0(3, 5), Error);
  EXPECT_EQ(t.slice0(1, 3).numel(), 12);
  EXPECT_EQ(t.slice0(1, 3).data<float>(), t.data<float>() + 6);
}

}  // namespace
}  // namespace dt
