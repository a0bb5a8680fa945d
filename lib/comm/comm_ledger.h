// The comm ledger: per rank and communicator (mesh axis), the calls, bytes and seconds of
// each collective kind. Bytes are what this rank contributed (its send buffer; for
// all-gather its piece; for recv what arrived), so they add up across ranks to the volume
// the ZeRO paper counts.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace dt::comm {

enum class CollKind : int32_t {
  AllReduce = 0, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll, Send, Recv, Barrier,
};
constexpr int kNumCollKinds = 9;
const char* coll_name(CollKind k);

struct CollStats {
  int64_t calls = 0;
  int64_t bytes = 0;
  double seconds = 0;
};

class CommLedger {
 public:
  void record(CollKind k, int64_t bytes, double seconds);
  CollStats get(CollKind k) const;
  void reset();
  // {"all_reduce":{"calls":..,"bytes":..,"seconds":..},...}
  std::string json() const;

 private:
  struct Slot {
    std::atomic<int64_t> calls{0}, bytes{0}, nanos{0};
  };
  std::array<Slot, kNumCollKinds> slots_;
};

}  // namespace dt::comm
