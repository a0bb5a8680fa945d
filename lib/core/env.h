// Tuning knobs read from the environment (documented where each is used). A value that is
// not an integer in range is reported once on stderr, naming the variable and the accepted
// range, and the default is used: a knob must never stop a job.
#pragma once
#include <cstdint>
#include <initializer_list>

namespace dt {

// The integer value of environment variable `name`, or `fallback` when it is unset or
// malformed or outside [lo, hi] (then with the one-line report). Thread-safe.
int64_t env_int(const char* name, int64_t fallback, int64_t lo, int64_t hi);

// The index in `accepted` of environment variable `name`'s value, or -1 when it is unset or
// not one of them (then with the one-line report listing them). Thread-safe.
int env_choice(const char* name, std::initializer_list<const char*> accepted);

}  // namespace dt
