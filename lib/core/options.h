// Options: typed values under string keys, behind the C API's dt_options. A consumer reads
// them through OptionReader, which rejects unknown keys and wrong types with messages that
// list what is accepted.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace dt {

using OptionValue = std::variant<int64_t, double, bool, std::string>;
const char* option_type_name(const OptionValue& v);

class Options {
 public:
  void set(const std::string& key, OptionValue v) { values_[key] = std::move(v); }
  const OptionValue* find(const std::string& key) const;
  const std::map<std::string, OptionValue>& values() const { return values_; }

 private:
  std::map<std::string, OptionValue> values_;
};

// Reads options for one consumer (`what`, e.g. "dt_configure"). Construct it with the
// accepted keys; any other key present is an INVALID_ARGUMENT naming the accepted ones.
class OptionReader {
 public:
  OptionReader(const Options* opts, std::string what, std::vector<std::string> accepted);
  // Returns the value of `key` or `fallback` when absent; throws on the wrong type.
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_double(const std::string& key, double fallback) const;  // accepts ints too
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  bool has(const std::string& key) const { return opts_ && opts_->find(key); }

 private:
  [[noreturn]] void wrong_type(const std::string& key, const char* wanted, const OptionValue& v) const;
  const Options* opts_;
  std::string what_;
};

// A string option holding integers separated by commas ("3,1"; "" is none), each in
// [lo, hi]. INVALID_ARGUMENT with bad_item(item) for the first item that is not, an empty
// item ("1,,2", "1,2,") included. A caller that reads a key the host gave refuses "" itself.
std::vector<int64_t> parse_int_list(const std::string& text, int64_t lo, int64_t hi,
                                    const std::function<std::string(const std::string& item)>& bad_item);

}  // namespace dt
