#include "flags.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <unistd.h>
#include <vector>

namespace dtcli {
namespace {

struct Declared {
  std::string command, flag, accepted;
};
std::vector<Declared>& declared() {
  static std::vector<Declared> d;
  return d;
}

// Shortest text that reads back as v: 0.9, 1e-09, 1e15, 86400.
std::string number_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  std::string s = buf;
  const size_t e = s.find("e+");
  if (e != std::string::npos) s.erase(e + 1, 1);  // 1e+15 -> 1e15
  return s;
}

template <class T>
std::string range_text_of(const Range<T>& r, std::string (*text)(T)) {
  if (!r.zero) return text(r.lo) + " to " + text(r.hi);
  const std::string zero = "0 (" + std::string(r.zero) + ")";
  return r.lo == 0 ? zero + " to " + text(r.hi) : zero + " or " + text(r.lo) + " to " + text(r.hi);
}
std::string int_text(int64_t v) { return std::to_string(v); }
std::string real_text(double v) { return number_text(v); }

template <class T>
bool accepted(const Range<T>& r, T v) {
  return (v >= r.lo && v <= r.hi) || (r.zero && v == 0);
}

// Registers the flag and its range; CLI11 hands the callback the last value given.
template <class T, class Parse>
CLI::Option* add_ranged(CLI::App* app, const std::string& flag, T& value, Range<T> range, const std::string& help,
                        const std::string& text, const char* type, Parse parse) {
  declared().push_back({app->get_name(), flag, text});
  const bool has_default = accepted(range, value);
  const std::string default_text = std::is_integral<T>::value ? int_text(static_cast<int64_t>(value))
                                                              : number_text(static_cast<double>(value));
  CLI::Option* o = app->add_option(
      flag,
      [&value, range, flag, text, parse](const CLI::results_t& res) {
        const std::string& s = res.back();
        T v{};
        if (!parse(s, v)) throw UsageError(flag + " " + s + ": not a" + (std::is_integral<T>::value ? "n integer" : " finite number") + "; accepted " + text);
        if (!accepted(range, v)) throw UsageError(flag + " " + s + ": accepted " + text);
        value = v;
        return true;
      },
      help + " [" + text + "]");
  o->type_name(type);
  if (has_default) o->default_str(default_text);
  return o;
}

bool parse_int(const std::string& s, int64_t& v) {
  const char* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (ec == std::errc::result_out_of_range) {  // an overflow is a number out of range, not junk
    v = s[0] == '-' ? INT64_MIN : INT64_MAX;
    return ptr == end;
  }
  return !s.empty() && ec == std::errc() && ptr == end;
}

bool parse_real(const std::string& s, double& v) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  char* end = nullptr;
  errno = 0;
  v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return false;
  if (std::isnan(v)) return false;
  if (errno == ERANGE && std::isfinite(v)) v = 0;  // underflow: too small to tell from 0
  return true;                                     // inf (or an overflow to it) is out of any range
}

}  // namespace

std::string range_text(const Range<int64_t>& r) { return range_text_of<int64_t>(r, int_text); }
std::string range_text(const Range<double>& r) { return range_text_of<double>(r, real_text); }

CLI::Option* add_int(CLI::App* app, const std::string& flag, int64_t& value, Range<int64_t> range,
                     const std::string& help) {
  return add_ranged(app, flag, value, range, help, range_text(range), "INT", parse_int);
}

CLI::Option* add_real(CLI::App* app, const std::string& flag, double& value, Range<double> range,
                      const std::string& help) {
  return add_ranged(app, flag, value, range, help, range_text(range), "NUMBER", parse_real);
}

std::string ranges_markdown() {
  std::string s = "| command | flag | accepted |\n|---|---|---|\n";
  for (const Declared& d : declared()) s += "| " + d.command + " | `" + d.flag + "` | " + d.accepted + " |\n";
  return s;
}

int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : INT64_MAX;  // unknown: no limit
}

std::string format_bytes(double bytes) {
  char buf[48];
  if (bytes >= 1e12)
    std::snprintf(buf, sizeof buf, "%.1f TB", bytes / 1e12);
  else if (bytes >= 1e9)
    std::snprintf(buf, sizeof buf, "%.1f GB", bytes / 1e9);
  else if (bytes >= 1e6)
    std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.0f bytes", bytes);
  return buf;
}

void refuse_if_too_big(const std::string& flag_and_value, double bytes, const std::string& why) {
  const double have = static_cast<double>(physical_memory_bytes());
  if (!(bytes > have)) return;
  throw UsageError(flag_and_value + ": needs about " + format_bytes(bytes) + " (" + number_text(std::round(bytes)) +
                   " bytes: " + why + "); this machine has " + format_bytes(have) + " of memory");
}

}  // namespace dtcli
