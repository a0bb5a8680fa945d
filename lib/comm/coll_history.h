// Forensics for hangs: the last collectives of one rank (over all its communicators), so a
// run that failed can show what each rank was doing and how far it got. Each entry is one
// call: its kind, axis, the communicator's sequence number, bytes, when it started, how
// long it took and how it ended ("running" while it has not). Cheap enough to be always on:
// one short lock per call start and end.
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "comm/comm_ledger.h"
#include "dtrain/dtrain.h"

namespace dt::comm {

class CollHistory {
 public:
  static constexpr size_t kCapacity = 64;  // per rank: enough to span a few train steps

  // Records a call that starts now; returns a token for finish().
  uint64_t begin(CollKind kind, const std::string& axis, int64_t seq, int64_t bytes);
  // Marks the call ended with `status` (DT_OK or the error it raised). A token whose entry
  // the ring has since overwritten is ignored.
  void finish(uint64_t token, dt_status status);
  // [{"seq":..,"kind":"all_reduce","axis":"dp","bytes":..,"start_unix_s":..,"seconds":..,
  //   "status":"ok"},...], oldest first; "seconds" so far for a running call.
  std::string json() const;

 private:
  struct Entry {
    uint64_t token = 0;  // 0: empty slot
    CollKind kind = CollKind::Barrier;
    std::string axis;
    int64_t seq = 0, bytes = 0;
    double start_unix_s = 0;
    std::chrono::steady_clock::time_point start;
    double seconds = 0;
    bool running = true;
    dt_status status = DT_OK;
  };
  mutable std::mutex mu_;
  std::vector<Entry> ring_ = std::vector<Entry>(kCapacity);
  uint64_t next_token_ = 1;
};

// "ok", "timeout", "aborted", "comm", ... : a status as the history names it.
const char* status_word(dt_status status);

}  // namespace dt::comm
