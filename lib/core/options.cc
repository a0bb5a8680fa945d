#include "core/options.h"

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

}  // namespace dt
