// The one exception type inside libdtrain. The api layer turns it into a dt_status and a
// thread-local message; nothing else crosses the C boundary.
#pragma once
#include <stdexcept>
#include <string>

#include "dtrain/dtrain.h"

namespace dt {

class Error : public std::runtime_error {
 public:
  Error(dt_status code, std::string message) : std::runtime_error(std::move(message)), code_(code) {}
  dt_status code() const { return code_; }

 private:
  dt_status code_;
};

[[noreturn]] inline void fail(dt_status code, const std::string& message) { throw Error(code, message); }
[[noreturn]] inline void invalid(const std::string& message) { fail(DT_ERR_INVALID_ARGUMENT, message); }

// DT_CHECK(cond, message): a bad argument unless cond holds. `message` should name the
// argument and what is accepted.
#define DT_CHECK(cond, message)                         \
  do {                                                  \
    if (!(cond)) ::dt::invalid(message);                \
  } while (0)

// DT_ASSERT: an internal invariant; failing it is a bug, reported as DT_ERR_INTERNAL.
#define DT_ASSERT(cond)                                                                    \
  do {                                                                                     \
    if (!(cond))                                                                           \
      ::dt::fail(DT_ERR_INTERNAL, std::string("internal check failed: " #cond " at ") +   \
                                      __FILE__ + ":" + std::to_string(__LINE__));          \
  } while (0)

}  // namespace dt
