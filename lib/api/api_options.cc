// dt_options: create/destroy, typed setters and getters.
#include <cstring>

#include "lib/api/firewall.h"

using dt::api::guard;
using dt::api::need;

namespace {

std::string checked_key(const char* key) {
  need(key, "key");
  DT_CHECK(key[0] != '\0', "key is empty; a non-empty string is required");
  return key;
}

template <class T> dt_status set_value(const char* fn, dt_options* o, const char* key, T value) {
  return guard(fn, [&] { need(o, "options")->opts.set(checked_key(key), dt::OptionValue(value)); });
}

// Looks up `key`; NOT_FOUND when absent, INVALID_ARGUMENT when it holds another type.
template <class T> const T& get_value(const dt_options* o, const char* key, const char* wanted) {
  std::string k = checked_key(key);
  const dt::OptionValue* v = need(o, "options")->opts.find(k);
  if (!v) dt::fail(DT_ERR_NOT_FOUND, "no option \"" + k + "\"");
  const T* p = std::get_if<T>(v);
  if (!p) dt::invalid("option \"" + k + "\" holds " + dt::option_type_name(*v) + ", not " + wanted);
  return *p;
}

}  // namespace

extern "C" {

dt_status dt_options_create(dt_options** out) {
  return guard("dt_options_create", [&] {
    need(out, "out");
    *out = new dt_options();
  });
}

void dt_options_destroy(dt_options* options) { delete options; }

dt_status dt_options_set_int(dt_options* o, const char* key, int64_t value) {
  return set_value("dt_options_set_int", o, key, value);
}
dt_status dt_options_set_double(dt_options* o, const char* key, double value) {
  return set_value("dt_options_set_double", o, key, value);
}
dt_status dt_options_set_bool(dt_options* o, const char* key, int32_t value) {
  return set_value("dt_options_set_bool", o, key, value != 0);
}
dt_status dt_options_set_string(dt_options* o, const char* key, const char* value) {
  return guard("dt_options_set_string", [&] {
    need(value, "value");
    need(o, "options")->opts.set(checked_key(key), dt::OptionValue(std::string(value)));
  });
}

dt_status dt_options_get_int(const dt_options* o, const char* key, int64_t* out) {
  return guard("dt_options_get_int", [&] {
    need(out, "out");
    *out = get_value<int64_t>(o, key, "int");
  });
}

dt_status dt_options_get_double(const dt_options* o, const char* key, double* out) {
  return guard("dt_options_get_double", [&] {
    need(out, "out");
    std::string k = checked_key(key);
    const dt::OptionValue* v = need(o, "options")->opts.find(k);
    if (v && std::holds_alternative<int64_t>(*v)) {
      *out = static_cast<double>(std::get<int64_t>(*v));
      return;
    }
    *out = get_value<double>(o, key, "double");
  });
}

dt_status dt_options_get_bool(const dt_options* o, const char* key, int32_t* out) {
  return guard("dt_options_get_bool", [&] {
    need(out, "out");
    *out = get_value<bool>(o, key, "bool") ? 1 : 0;
  });
}

dt_status dt_options_get_string(const dt_options* o, const char* key, const char** out) {
  return guard("dt_options_get_string", [&] {
    need(out, "out");
    *out = get_value<std::string>(o, key, "string").c_str();
  });
}

dt_status dt_options_count(const dt_options* o, int64_t* out) {
  return guard("dt_options_count", [&] {
    need(out, "out");
    *out = static_cast<int64_t>(need(o, "options")->opts.values().size());
  });
}

}  // extern "C"
