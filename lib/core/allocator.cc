#include "core/allocator.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/gpu_runtime.h"
#include "core/rank_scope.h"

namespace dt {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kPage = 4096;

struct DeviceKey {
  size_t operator()(const Device& d) const { return static_cast<size_t>(d.type) * 1024 + d.index; }
};

// The free-block cache and ledger of one device.
struct DevicePool {
  Ledger ledger;
  std::unique_ptr<Ledger> ranks[kMaxRankLedgers];  // made on a rank's first allocation
  std::multimap<size_t, void*> free_blocks;  // capacity -> block
  int64_t cached = 0;
  PoolCounters counters;
};

class Pools {
 public:
  static Pools& get() {
    static Pools* p = new Pools();  // never destroyed: tensors may outlive static destructors
    return *p;
  }
  DevicePool& pool(Device d) {
    std::lock_guard<std::mutex> g(mu);
    auto& slot = pools[d];
    if (!slot) slot = std::make_unique<DevicePool>();
    return *slot;
  }
  std::mutex mu;
  std::unordered_map<Device, std::unique_ptr<DevicePool>, DeviceKey> pools;
  AllocatorSettings settings;
};

// The rank's ledger, made if missing; null for no rank. Call with Pools::mu held.
Ledger* rank_ledger_locked(DevicePool& dp, int rank) {
  if (rank < 0 || rank >= kMaxRankLedgers) return nullptr;
  if (!dp.ranks[rank]) dp.ranks[rank] = std::make_unique<Ledger>();
  return dp.ranks[rank].get();
}

void* system_alloc(Device d, size_t capacity) {
  if (d.type == DeviceType::CPU) return std::aligned_alloc(kAlign, capacity);
  return gpu::device_alloc(d.index, capacity);
}

void system_free(Device d, void* p) {
  if (d.type == DeviceType::CPU) std::free(p);
  else gpu::device_free(d.index, p);
}

void drop_cache_locked(Device d, DevicePool& dp) {
  for (auto& kv : dp.free_blocks) system_free(d, kv.second);
  dp.counters.system_frees += static_cast<int64_t>(dp.free_blocks.size());
  dp.free_blocks.clear();
  dp.cached = 0;
}

std::string human(size_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%zu bytes (%.2f GiB)", bytes, bytes / 1073741824.0);
  return buf;
}

}  // namespace

size_t pool_size_class(size_t bytes) {
  if (bytes < kPage) return (bytes + kAlign - 1) / kAlign * kAlign;
  size_t top = size_t(1) << (63 - __builtin_clzll(bytes));  // largest power of two <= bytes
  size_t step = top >= 4 * kPage ? top / 4 : kPage;
  return (bytes + step - 1) / step * step;
}

std::shared_ptr<Storage> Storage::create(Device device, size_t bytes, MemTag tag, bool zero) {
  DT_ASSERT(bytes > 0);
  require_available(device);
  Pools& pools = Pools::get();
  DevicePool& dp = pools.pool(device);
  if (bytes > (size_t(1) << 62)) fail(DT_ERR_OUT_OF_MEMORY, "cannot allocate " + human(bytes) + " on " + device.str());
  size_t capacity = pool_size_class(bytes);
  void* ptr = nullptr;
  {
    std::lock_guard<std::mutex> g(pools.mu);
    int64_t limit = pools.settings.memory_limit_bytes;
    if (device.type == DeviceType::CPU && limit > 0 &&
        dp.ledger.current(DT_MEM_ALL) + static_cast<int64_t>(bytes) > limit)
      fail(DT_ERR_OUT_OF_MEMORY, "cannot allocate " + human(bytes) + " on cpu: memory_limit_bytes=" +
                                     std::to_string(limit) + " and " +
                                     std::to_string(dp.ledger.current(DT_MEM_ALL)) + " bytes are in use");
    auto it = dp.free_blocks.find(capacity);
    if (it != dp.free_blocks.end()) {
      ptr = it->second;
      dp.free_blocks.erase(it);
      dp.cached -= static_cast<int64_t>(capacity);
      ++dp.counters.reuses;
    }
    if (!ptr) {
      ++dp.counters.system_allocs;
      ptr = system_alloc(device, capacity);
      if (!ptr && dp.cached > 0) {  // give the cache back and try once more
        drop_cache_locked(device, dp);
        ptr = system_alloc(device, capacity);
      }
      if (!ptr) fail(DT_ERR_OUT_OF_MEMORY, "cannot allocate " + human(bytes) + " on " + device.str());
    }
    dp.ledger.add(tag, static_cast<int64_t>(bytes));
    if (Ledger* rl = rank_ledger_locked(dp, current_rank())) rl->add(tag, static_cast<int64_t>(bytes));
  }
  std::shared_ptr<Storage> s(new Storage());
  s->rank_ = current_rank();
  s->ptr_ = ptr;
  s->bytes_ = bytes;
  s->capacity_ = capacity;
  s->device_ = device;
  s->tag_ = tag;
  if (!zero) return s;
  if (device.type == DeviceType::CPU) std::memset(ptr, 0, bytes);
  else gpu::memset_zero(device.index, ptr, bytes);
  return s;
}

std::shared_ptr<Storage> Storage::borrow(Device device, void* ptr, size_t bytes, std::function<void()> release) {
  DT_ASSERT(ptr != nullptr && bytes > 0);
  std::shared_ptr<Storage> s(new Storage());
  s->ptr_ = ptr;
  s->bytes_ = s->capacity_ = bytes;
  s->device_ = device;
  s->borrowed_ = true;
  s->release_ = std::move(release);
  return s;
}

Storage::~Storage() {
  if (borrowed_) {
    if (release_) release_();
    return;
  }
  if (!ptr_) return;
  Pools& pools = Pools::get();
  DevicePool& dp = pools.pool(device_);
  std::lock_guard<std::mutex> g(pools.mu);
  dp.ledger.sub(tag_, static_cast<int64_t>(bytes_));
  if (Ledger* rl = rank_ledger_locked(dp, rank_)) rl->sub(tag_, static_cast<int64_t>(bytes_));
  // Every size is kept, small blocks too: on a GPU each cudaFree synchronizes the device
  // (and can deadlock against in-flight NCCL kernels), and the step makes tiny blocks
  // (bad-index flags, scalar sums) every time.
  bool keep = dp.cached + static_cast<int64_t>(capacity_) <= pools.settings.pool_cache_bytes;
  if (keep) {
    dp.free_blocks.emplace(capacity_, ptr_);
    dp.cached += static_cast<int64_t>(capacity_);
  } else {
    ++dp.counters.system_frees;
    system_free(device_, ptr_);
  }
}

void Storage::set_rank(int rank) {
  Pools& pools = Pools::get();
  DevicePool& dp = pools.pool(device_);
  std::lock_guard<std::mutex> g(pools.mu);
  if (Ledger* from = rank_ledger_locked(dp, rank_)) from->sub(tag_, static_cast<int64_t>(bytes_));
  if (Ledger* to = rank_ledger_locked(dp, rank)) to->add(tag_, static_cast<int64_t>(bytes_));
  rank_ = rank;
}

void allocator_configure(const AllocatorSettings& s) {
  Pools& pools = Pools::get();
  std::lock_guard<std::mutex> g(pools.mu);
  pools.settings = s;
  for (auto& kv : pools.pools)
    if (kv.second->cached > s.pool_cache_bytes) drop_cache_locked(kv.first, *kv.second);
}

AllocatorSettings allocator_settings() {
  Pools& pools = Pools::get();
  std::lock_guard<std::mutex> g(pools.mu);
  return pools.settings;
}

Ledger& ledger_for(Device device) { return Pools::get().pool(device).ledger; }

const Ledger* rank_ledger(Device device, int rank) {
  Pools& pools = Pools::get();
  DevicePool& dp = pools.pool(device);
  std::lock_guard<std::mutex> g(pools.mu);
  return rank >= 0 && rank < kMaxRankLedgers ? dp.ranks[rank].get() : nullptr;
}

std::vector<int> ranks_with_ledger(Device device) {
  Pools& pools = Pools::get();
  DevicePool& dp = pools.pool(device);
  std::lock_guard<std::mutex> g(pools.mu);
  std::vector<int> out;
  for (int r = 0; r < kMaxRankLedgers; ++r)
    if (dp.ranks[r]) out.push_back(r);
  return out;
}

void reset_peaks(Device device) {
  Pools& pools = Pools::get();
  DevicePool& dp = pools.pool(device);
  std::lock_guard<std::mutex> g(pools.mu);
  dp.ledger.reset_peak();
  for (auto& r : dp.ranks)
    if (r) r->reset_peak();
}

int64_t pool_cached_bytes(Device device) {
  Pools& pools = Pools::get();
  DevicePool& dp = pools.pool(device);
  std::lock_guard<std::mutex> g(pools.mu);
  return dp.cached;
}

PoolCounters pool_counters(Device device) {
  Pools& pools = Pools::get();
  DevicePool& dp = pools.pool(device);
  std::lock_guard<std::mutex> g(pools.mu);
  return dp.counters;
}

void pool_release_cached(Device device) {
  Pools& pools = Pools::get();
  DevicePool& dp = pools.pool(device);
  std::lock_guard<std::mutex> g(pools.mu);
  drop_cache_locked(device, dp);
}

}  // namespace dt
