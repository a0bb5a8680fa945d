// A cancellation flag (dt_cancel): any thread raises it, the engine's calls read it at their
// check points (engine/trainer.h says where). One atomic, so raising it never blocks and is
// safe from a signal handler or a timer thread.
#pragma once
#include <atomic>
#include <string>

#include "core/error.h"

namespace dt {

class CancelFlag {
 public:
  void request() { raised_.store(true, std::memory_order_release); }
  void reset() { raised_.store(false, std::memory_order_release); }
  bool requested() const { return raised_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> raised_{false};
};

// The error a cancelled call ends with: "<what> cancelled (<why>)".
[[noreturn]] inline void throw_cancelled(const std::string& what, const std::string& why) {
  throw Error(DT_ERR_CANCELLED, what + " cancelled (" + why + ")");
}

}  // namespace dt
