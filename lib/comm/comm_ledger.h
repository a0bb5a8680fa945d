// The comm ledger: per rank and communicator (mesh axis), the calls, bytes and seconds of
// each collective kind. Bytes are what this rank contributed (its send buffer; for
// all-gather its piece; for recv what arrived). Wire bytes are what a bandwidth-optimal
// algorithm (ring or pairwise) delivers to this rank over the network for that call, the
// volume the ZeRO paper counts: an all-reduce of S bytes over n ranks is 2(n-1)/n S (a
// reduce-scatter then an all-gather), a reduce-scatter or an all-gather (n-1)/n S of the
// full buffer, a broadcast S on every rank but the root, an all-to-all what comes from
// peers, a recv its bytes. So DDP's step is 2Ψ per rank and ZeRO-3's 3Ψ: the 1.5x.
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
  int64_t wire_bytes = 0;
  double seconds = 0;
};

class CommLedger {
 public:
  void record(CollKind k, int64_t bytes, int64_t wire_bytes, double seconds);
  CollStats get(CollKind k) const;
  void reset();
  // {"all_reduce":{"calls":..,"bytes":..,"seconds":..},...}
  std::string json() const;

 private:
  struct Slot {
    std::atomic<int64_t> calls{0}, bytes{0}, wire{0}, nanos{0};
  };
  std::array<Slot, kNumCollKinds> slots_;
};

}  // namespace dt::comm
