// The allocator: every byte a tensor holds comes from here and is counted in the ledger of
// its device, and in the ledger of the rank it belongs to: the allocating thread's current
// rank (core/rank_scope.h), or one set later with set_rank (a host-built model adopted by
// a rank). Ranks 0 to kMaxRankLedgers - 1 have a ledger each; memory of no rank (or of a
// higher rank) is counted in the device's ledger only. Freed blocks of every size are cached
// by size class and reused, because first touch of fresh pages is slow (about 15 us per
// 4 KiB page on the reference machine), a cudaFree synchronizes the whole device, and
// training allocates the same sizes every step.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/ledger.h"

namespace dt {

// One allocation: `bytes` requested (what the ledger counts), `capacity` reserved.
class Storage {
 public:
  // Storage of `bytes` (> 0) on `device`, counted under `tag`, zero-filled unless `zero` is
  // false (scratch that is written before it is read). Throws OUT_OF_MEMORY when the device
  // or the configured limit cannot satisfy it.
  static std::shared_ptr<Storage> create(Device device, size_t bytes, MemTag tag, bool zero = true);
  // Storage over `bytes` at `ptr` that someone else owns (memory lent through the C API):
  // not counted in any ledger, never pooled; `release` (may be empty) runs when the last
  // view of it goes, on whatever thread that is.
  static std::shared_ptr<Storage> borrow(Device device, void* ptr, size_t bytes, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  MemTag tag() const { return tag_; }
  int rank() const { return rank_; }
  // Credits this storage to `rank` (-1: no rank) from now on, moving its bytes over.
  void set_rank(int rank);

 private:
  Storage() = default;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  size_t capacity_ = 0;
  Device device_;
  MemTag tag_ = MemTag::Workspace;
  int rank_ = -1;
  bool borrowed_ = false;          // borrow(): the lender's memory
  std::function<void()> release_;  // borrow(): what ends the loan
};

constexpr int kMaxRankLedgers = 1024;

struct AllocatorSettings {
  int64_t memory_limit_bytes = 0;           // host bytes held by tensors; 0 = no cap
  int64_t pool_cache_bytes = int64_t(1) << 30;  // most free bytes kept for reuse, per device
};

// Process-wide settings and queries.
void allocator_configure(const AllocatorSettings& s);
AllocatorSettings allocator_settings();
Ledger& ledger_for(Device device);
// The ledger of `rank`'s memory on `device`; null when that rank never held any there.
const Ledger* rank_ledger(Device device, int rank);
// Ranks with a ledger on `device`, ascending.
std::vector<int> ranks_with_ledger(Device device);
// Resets the device's peaks and those of every rank on it.
void reset_peaks(Device device);
int64_t pool_cached_bytes(Device device);
// How often the pool of a device went to the system (malloc/cudaMalloc, free/cudaFree) and
// how often it served a request from its cache: a training step in steady state should
// make no system calls.
struct PoolCounters {
  int64_t system_allocs = 0, system_frees = 0, reuses = 0;
};
PoolCounters pool_counters(Device device);
void pool_release_cached(Device device);  // returns every cached block to the system

// Size class a request is rounded to (exposed for tests): below one page, 64-byte
// multiples; above, four classes per power of two (at most 25% over).
size_t pool_size_class(size_t bytes);

}  // namespace dt
