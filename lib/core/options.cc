#include "core/options.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"

namespace dt {

const char* option_type_name(const OptionValue& v) {
  static const char* const names[] = {"int", "double", "bool", "string"};
  return names[v.index()];
}

const OptionValue* Options::find(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

OptionReader::OptionReader(const Options* opts, std::string what, std::vector<std::string> accepted)
    : opts_(opts), what_(std::move(what)) {
  if (!opts_) return;
  for (const auto& kv : opts_->values()) {
    bool ok = false;
    for (const auto& a : accepted) ok = ok || a == kv.first;
    if (ok) continue;
    std::string list;
    for (const auto& a : accepted) list += (list.empty() ? "" : ", ") + ("\"" + a + "\"");
    invalid(what_ + ": unknown option key \"" + kv.first + "\"; accepted: " + (list.empty() ? "none" : list));
  }
}

void OptionReader::wrong_type(const std::string& key, const char* wanted, const OptionValue& v) const {
  invalid(what_ + ": option \"" + key + "\" must be " + wanted + ", got " + option_type_name(v));
}

int64_t OptionReader::get_int(const std::string& key, int64_t fallback) const {
  const OptionValue* v = opts_ ? opts_->find(key) : nullptr;
  if (!v) return fallback;
  if (auto p = std::get_if<int64_t>(v)) return *p;
  wrong_type(key, "an int", *v);
}

double OptionReader::get_double(const std::string& key, double fallback) const {
  const OptionValue* v = opts_ ? opts_->find(key) : nullptr;
  if (!v) return fallback;
  if (auto p = std::get_if<double>(v)) return *p;
  if (auto p = std::get_if<int64_t>(v)) return static_cast<double>(*p);
  wrong_type(key, "a double", *v);
}

bool OptionReader::get_bool(const std::string& key, bool fallback) const {
  const OptionValue* v = opts_ ? opts_->find(key) : nullptr;
  if (!v) return fallback;
  if (auto p = std::get_if<bool>(v)) return *p;
  wrong_type(key, "a bool", *v);
}

std::string OptionReader::get_string(const std::string& key, const std::string& fallback) const {
  const OptionValue* v = opts_ ? opts_->find(key) : nullptr;
  if (!v) return fallback;
  if (auto p = std::get_if<std::string>(v)) return *p;
  wrong_type(key, "a string", *v);
}

std::vector<int64_t> parse_int_list(const std::string& text, int64_t lo, int64_t hi,
                                    const std::function<std::string(const std::string& item)>& bad_item) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    char* stop = nullptr;
    const long long v = std::strtoll(item.c_str(), &stop, 10);
    DT_CHECK(!item.empty() && *stop == '\0' && v >= lo && v <= hi, bad_item(item));
    out.push_back(v);
    at = end + 1;
  }
  // "1,2," ends in an empty item, which the loop above never reaches: refused like "1,,2".
  DT_CHECK(text.empty() || text.back() != ',', bad_item(""));
  return out;
}

}  // namespace dt
