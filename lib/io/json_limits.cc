#include "io/json_limits.h"

#include <set>
#include <vector>

#include "core/error.h"
#include "io/file_util.h"

namespace dt::io {
namespace {

using json = nlohmann::json;

// A SAX handler that only counts and remembers the keys of the objects still open (their
// number is bounded by max_depth, their keys by max_values). It stops the parse at the
// first violation and keeps the message.
class LimitChecker {
 public:
  explicit LimitChecker(const JsonLimits& l) : limits_(l) {}
  std::string problem;

  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(json::number_integer_t) { return value(); }
  bool number_unsigned(json::number_unsigned_t) { return value(); }
  bool number_float(json::number_float_t, const json::string_t&) { return value(); }
  bool string(json::string_t&) { return value(); }
  bool binary(json::binary_t&) { return stop("binary values are not JSON"); }
  bool start_object(std::size_t) { return open(true); }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(false); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    if (!value()) return false;
    std::set<std::string>& keys = open_.back().keys;
    if (!keys.insert(k).second) return stop("the key \"" + k + "\" appears twice in one object");
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) {
    return stop("not valid JSON (at byte " + std::to_string(position) + ")");
  }

 private:
  struct Open {
    bool object;
    std::set<std::string> keys;
  };
  const JsonLimits& limits_;
  std::vector<Open> open_;
  size_t values_ = 0;

  bool stop(std::string what) {
    if (problem.empty()) problem = std::move(what);
    return false;
  }
  bool value() {
    if (++values_ > limits_.max_values)
      return stop("more than " + std::to_string(limits_.max_values) + " values; the limit for this file");
    return true;
  }
  bool open(bool object) {
    if (static_cast<int>(open_.size()) >= limits_.max_depth)
      return stop("nested deeper than " + std::to_string(limits_.max_depth) + " levels; the limit for this file");
    open_.push_back({object, {}});
    return value();
  }
  bool close() {
    open_.pop_back();
    return true;
  }
};

}  // namespace

json parse_bounded_json(const std::string& path, const char* text, size_t n, const JsonLimits& limits) {
  if (n > limits.max_bytes)
    fail(DT_ERR_IO, path + ": " + std::to_string(n) + " bytes of JSON; the limit for this file is " +
                        std::to_string(limits.max_bytes));
  LimitChecker check(limits);
  bool ok = json::sax_parse(text, text + n, &check, json::input_format_t::json, /*strict=*/true);
  if (!ok) fail(DT_ERR_IO, path + ": " + (check.problem.empty() ? std::string("not valid JSON") : check.problem));
  return json::parse(text, text + n, nullptr, /*allow_exceptions=*/false);
}

nlohmann::json read_bounded_json_file(const std::string& path, const char* what, const JsonLimits& limits) {
  const std::vector<char> text = read_file(path, limits.max_bytes, what);
  return parse_bounded_json(path, text.data(), text.size(), limits);
}

}  // namespace dt::io
