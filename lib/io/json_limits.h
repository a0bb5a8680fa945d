// Bounded JSON for files from outside (checkpoint indexes, safetensors headers).
//
// A hostile file must not crash or exhaust the process. nlohmann's DOM copies and destroys
// nested values recursively, so ~100,000 levels of "[[[[..." overflow the stack; and every
// value costs tens of bytes of DOM, so a small file of tiny values can cost gigabytes. So
// the text is first checked by an iterative SAX pass (no recursion, no DOM) against these
// limits, and for duplicate keys in any object (JSON leaves them undefined; the DOM would
// silently keep one), and only then parsed. Every failure is DT_ERR_IO naming the file.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace dt::io {

struct JsonLimits {
  size_t max_bytes = size_t(32) << 20;  // the text itself
  int max_depth = 32;                   // nested arrays and objects
  size_t max_values = size_t(1) << 21;  // every value, key and container counted once
};

// Parses `n` bytes of `text` from `path`, which is named in every error.
nlohmann::json parse_bounded_json(const std::string& path, const char* text, size_t n,
                                  const JsonLimits& limits = JsonLimits{});

// The file at `path` (a regular file of at most limits.max_bytes; `what` names it in the
// error, e.g. "a model config.json"), read and parsed with those limits.
nlohmann::json read_bounded_json_file(const std::string& path, const char* what, const JsonLimits& limits = JsonLimits{});

}  // namespace dt::io
