// Tuning knobs read from the environment (documented where each is used). A value that is
// not an integer in range is reported once on stderr, naming the variable and the accepted
// range, and the default is used: a knob must never stop a job.
#pragma once
#include <cstdint>

namespace dt {

// The integer value of environment variable `name`, or `fallback` when it is unset or
// malformed or outside [lo, hi] (then with the one-line report). Thread-safe.
int64_t env_int(const char* name, int64_t fallback, int64_t lo, int64_t hi);

}  // namespace dt
