#include "core/ledger.h"

#include <cstring>

#include "core/error.h"

namespace dt {
namespace {

const char* const kTagNames[kNumMemTags + 1] = {"all", "param", "grad", "optimizer", "activation",
                                                "kv_cache", "comm_buffer", "workspace", "checkpoint"};

void raise_peak(std::atomic<int64_t>& peak, int64_t value) {
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

int slot(int32_t tag) {
  if (tag < 0 || tag > kNumMemTags)
    invalid("tag: unknown memory tag " + std::to_string(tag) + "; accepted: DT_MEM_ALL (0) to DT_MEM_CHECKPOINT (8)");
  return tag;
}

}  // namespace

const char* mem_tag_name(int32_t tag) { return (tag >= 0 && tag <= kNumMemTags) ? kTagNames[tag] : "unknown"; }

MemTag parse_mem_tag(const char* name, const char* arg_name) {
  for (int i = 1; i <= kNumMemTags; ++i)
    if (name && std::strcmp(name, kTagNames[i]) == 0) return static_cast<MemTag>(i);
  invalid(std::string(arg_name) + ": unknown memory tag \"" + (name ? name : "(null)") +
          "\"; accepted: param, grad, optimizer, activation, kv_cache, comm_buffer, workspace, checkpoint");
}

void Ledger::add(MemTag tag, int64_t bytes) {
  int s = static_cast<int>(tag);
  raise_peak(peak_[s], current_[s].fetch_add(bytes, std::memory_order_relaxed) + bytes);
  raise_peak(peak_[0], current_[0].fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void Ledger::sub(MemTag tag, int64_t bytes) {
  current_[static_cast<int>(tag)].fetch_sub(bytes, std::memory_order_relaxed);
  current_[0].fetch_sub(bytes, std::memory_order_relaxed);
}

int64_t Ledger::current(int32_t tag) const { return current_[slot(tag)].load(std::memory_order_relaxed); }
int64_t Ledger::peak(int32_t tag) const { return peak_[slot(tag)].load(std::memory_order_relaxed); }

void Ledger::reset_peak() {
  for (int i = 0; i <= kNumMemTags; ++i) peak_[i].store(current_[i].load());
}

std::string Ledger::tags_json() const {
  std::string s = "{";
  for (int i = 0; i <= kNumMemTags; ++i) {
    if (i) s += ",";
    s += "\"" + std::string(kTagNames[i]) + "\":{\"current\":" + std::to_string(current(i)) +
         ",\"peak\":" + std::to_string(peak(i)) + "}";
  }
  return s + "}";
}

std::string Ledger::json(const std::string& device, int64_t pool_cached_bytes) const {
  return "{\"device\":\"" + device + "\",\"tags\":" + tags_json() +
         ",\"pool_cached_bytes\":" + std::to_string(pool_cached_bytes) + "}";
}

}  // namespace dt
