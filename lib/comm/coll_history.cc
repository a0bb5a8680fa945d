#include "comm/coll_history.h"

#include <cstdio>

namespace dt::comm {

const char* status_word(dt_status status) {
  switch (status) {
    case DT_OK: return "ok";
    case DT_ERR_INVALID_ARGUMENT: return "invalid_argument";
    case DT_ERR_OUT_OF_MEMORY: return "out_of_memory";
    case DT_ERR_UNSUPPORTED: return "unsupported";
    case DT_ERR_NOT_FOUND: return "not_found";
    case DT_ERR_IO: return "io";
    case DT_ERR_COMM: return "comm";
    case DT_ERR_TIMEOUT: return "timeout";
    case DT_ERR_ABORTED: return "aborted";
    default: return "internal";
  }
}

uint64_t CollHistory::begin(CollKind kind, const std::string& axis, int64_t seq, int64_t bytes) {
  // Wall-clock start, so the histories of ranks in different processes line up.
  const double unix_s = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::lock_guard<std::mutex> g(mu_);
  const uint64_t token = next_token_++;
  Entry& e = ring_[token % kCapacity];
  e = Entry{};
  e.token = token;
  e.kind = kind;
  e.axis = axis;
  e.seq = seq;
  e.bytes = bytes;
  e.start_unix_s = unix_s;
  e.start = std::chrono::steady_clock::now();
  return token;
}

void CollHistory::finish(uint64_t token, dt_status status) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> g(mu_);
  Entry& e = ring_[token % kCapacity];
  if (e.token != token || !e.running) return;
  e.running = false;
  e.status = status;
  e.seconds = std::chrono::duration<double>(now - e.start).count();
}

std::string CollHistory::json() const {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> g(mu_);
  std::string out = "[";
  // Oldest first: the slot after the newest is the oldest once the ring has wrapped.
  for (uint64_t t = next_token_ > kCapacity ? next_token_ - kCapacity : 1; t < next_token_; ++t) {
    const Entry& e = ring_[t % kCapacity];
    if (e.token != t) continue;
    const double secs = e.running ? std::chrono::duration<double>(now - e.start).count() : e.seconds;
    char nums[160];
    std::snprintf(nums, sizeof nums, "\"bytes\":%lld,\"start_unix_s\":%.6f,\"seconds\":%.6f",
                  static_cast<long long>(e.bytes), e.start_unix_s, secs);
    out += std::string(out.size() > 1 ? "," : "") + "{\"seq\":" + std::to_string(e.seq) + ",\"kind\":\"" +
           coll_name(e.kind) + "\",\"axis\":\"" + e.axis + "\"," + nums + ",\"status\":\"" +
           (e.running ? "running" : status_word(e.status)) + "\"}";
  }
  return out + "]";
}

}  // namespace dt::comm
