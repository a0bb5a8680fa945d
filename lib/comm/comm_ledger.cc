#include "comm/comm_ledger.h"

namespace dt::comm {

const char* coll_name(CollKind k) {
  static const char* const names[kNumCollKinds] = {"all_reduce", "all_gather", "reduce_scatter",
                                                   "broadcast",  "reduce",     "all_to_all",
                                                   "send",       "recv",       "barrier"};
  int i = static_cast<int>(k);
  return i >= 0 && i < kNumCollKinds ? names[i] : "unknown";
}

void CommLedger::record(CollKind k, int64_t bytes, int64_t wire_bytes, double seconds) {
  Slot& s = slots_[static_cast<int>(k)];
  s.calls.fetch_add(1, std::memory_order_relaxed);
  s.bytes.fetch_add(bytes, std::memory_order_relaxed);
  s.wire.fetch_add(wire_bytes, std::memory_order_relaxed);
  s.nanos.fetch_add(static_cast<int64_t>(seconds * 1e9), std::memory_order_relaxed);
}

CollStats CommLedger::get(CollKind k) const {
  const Slot& s = slots_[static_cast<int>(k)];
  return CollStats{s.calls.load(), s.bytes.load(), s.wire.load(), s.nanos.load() * 1e-9};
}

void CommLedger::reset() {
  for (auto& s : slots_) {
    s.calls = 0;
    s.bytes = 0;
    s.wire = 0;
    s.nanos = 0;
  }
}

std::string CommLedger::json() const {
  std::string out = "{";
  for (int i = 0; i < kNumCollKinds; ++i) {
    CollStats st = get(static_cast<CollKind>(i));
    if (i) out += ",";
    out += "\"" + std::string(coll_name(static_cast<CollKind>(i))) + "\":{\"calls\":" + std::to_string(st.calls) +
           ",\"bytes\":" + std::to_string(st.bytes) + ",\"wire_bytes\":" + std::to_string(st.wire_bytes) + ",\"seconds\":" + std::to_string(st.seconds) + "}";
  }
  return out + "}";
}

}  // namespace dt::comm
