// The memory ledger: bytes held per tag on one device, now and at peak. Every tensor's
// storage is counted here, so "memory per rank and per kind" is a query, not an estimate.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include "dtrain/dtrain.h"

namespace dt {

enum class MemTag : int32_t {
  Param = DT_MEM_PARAM,
  Grad = DT_MEM_GRAD,
  Optimizer = DT_MEM_OPTIMIZER,
  Activation = DT_MEM_ACTIVATION,
  KvCache = DT_MEM_KV_CACHE,
  CommBuffer = DT_MEM_COMM_BUFFER,
  Workspace = DT_MEM_WORKSPACE,
  Checkpoint = DT_MEM_CHECKPOINT,
};
constexpr int kNumMemTags = 8;

const char* mem_tag_name(int32_t tag);  // "all" for DT_MEM_ALL, "unknown" when out of range
// Parses a tag name other than "all"; throws naming `arg_name` and the accepted names.
MemTag parse_mem_tag(const char* name, const char* arg_name);

class Ledger {
 public:
  void add(MemTag tag, int64_t bytes);
  void sub(MemTag tag, int64_t bytes);
  // `tag` is a dt_mem_tag (DT_MEM_ALL = the sum); throws on an unknown tag.
  int64_t current(int32_t tag) const;
  int64_t peak(int32_t tag) const;
  void reset_peak();
  std::string json(const std::string& device, int64_t pool_cached_bytes) const;
  // {"param":{"current":..,"peak":..},..}, every tag and "all".
  std::string tags_json() const;

 private:
  // Slot 0 is the total; its peak is the peak of the sum, not the sum of peaks.
  std::atomic<int64_t> current_[kNumMemTags + 1] = {};
  std::atomic<int64_t> peak_[kNumMemTags + 1] = {};
};

}  // namespace dt
