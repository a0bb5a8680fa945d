#include "common/bench_util.h"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dt::bench {

namespace {
[[noreturn]] void usage_error(const std::string& usage, const std::string& message) {
  std::fprintf(stderr, "error: %s\n\n%s", message.c_str(), usage.c_str());
  std::exit(2);
}
}  // namespace

Options parse_args(int argc, char** argv, const std::string& usage, const std::vector<std::string>& extra_keys) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(usage, arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage.c_str(), stdout);
      std::exit(0);
    } else if (arg == "--quick") {
      o.quick = true;
    } else if (arg == "--threads") {
      std::string v = value();
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 1024) usage_error(usage, "--threads " + v + ": accepted 1..1024");
      o.threads = static_cast<int>(n);
    } else if (arg == "--json") {
      o.json_path = value();
    } else if (arg == "--filter") {
      o.filter = value();
    } else if (arg.rfind("--", 0) == 0 &&
               std::find(extra_keys.begin(), extra_keys.end(), arg.substr(2)) != extra_keys.end()) {
      o.extra.emplace_back(arg.substr(2), value());
    } else {
      usage_error(usage, "unknown argument '" + arg + "'");
    }
  }
  return o;
}

std::string option_value(const Options& o, const std::string& key, const std::string& fallback) {
  for (const auto& kv : o.extra)
    if (kv.first == key) return kv.second;
  return fallback;
}

bool selected(const Options& o, const std::string& name) {
  return o.filter.empty() || name.find(o.filter) != std::string::npos;
}

double now_s() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<Stats> time_interleaved(const std::vector<std::function<void()>>& fns, const Budget& budget) {
  size_t n = fns.size();
  std::vector<std::vector<double>> samples(n);
  auto round = [&](bool keep) {
    double total = 0;
    for (size_t i = 0; i < n; ++i) {
      double t0 = now_s();
      fns[i]();
      double dt = now_s() - t0;
      if (keep) samples[i].push_back(dt);
      total += dt;
    }
    return total;
  };
  round(false);             // warm-up: first touch, caches, lazy initialization
  double per_round = round(true);  // the first timed round also sizes the rest
  int reps = budget.min_reps;
  if (per_round > 0) reps = static_cast<int>(std::ceil(budget.seconds / per_round));
  reps = std::clamp(reps, std::max(1, budget.min_reps), std::max(budget.min_reps, budget.max_reps));
  for (int r = 1; r < reps; ++r) round(true);
  std::vector<Stats> out(n);
  for (size_t i = 0; i < n; ++i) {
    const auto& s = samples[i];
    out[i].median_s = median(s);
    out[i].min_s = *std::min_element(s.begin(), s.end());
    out[i].max_s = *std::max_element(s.begin(), s.end());
    out[i].reps = static_cast<int>(s.size());
  }
  return out;
}

void progress(const std::string& section, int index, int count, const std::string& name) {
  std::fprintf(stderr, "[%s %d/%d] %s\n", section.c_str(), index, count, name.c_str());
  std::fflush(stderr);
}

std::string load_average() {
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return "?";
  double a = 0, b = 0, c = 0;
  int n = std::fscanf(f, "%lf %lf %lf", &a, &b, &c);
  std::fclose(f);
  return n == 3 ? strf("%.2f %.2f %.2f", a, b, c) : "?";
}

std::string strf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int len = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string s(len > 0 ? static_cast<size_t>(len) : 0, '\0');
  if (len > 0) std::vsnprintf(&s[0], s.size() + 1, fmt, ap2);
  va_end(ap2);
  return s;
}

// ---- JSON -----------------------------------------------------------------------------------

Report::Record& Report::Record::num(const std::string& key, double v) {
  Value x;
  x.kind = Value::Num;
  x.num = v;
  fields.emplace_back(key, x);
  return *this;
}

Report::Record& Report::Record::str(const std::string& key, const std::string& v) {
  Value x;
  x.kind = Value::Str;
  x.str = v;
  fields.emplace_back(key, x);
  return *this;
}

Report::Record& Report::Record::flag(const std::string& key, bool v) {
  Value x;
  x.kind = Value::Bool;
  x.flag = v;
  fields.emplace_back(key, x);
  return *this;
}

Report::Report(std::string bench_name) : bench_(std::move(bench_name)) {}

Report::Record& Report::add(const std::string& section, const std::string& name) {
  records_.emplace_back();
  records_.back().str("section", section).str("name", name);
  return records_.back();
}

void Report::note(const std::string& section, const std::string& status, const std::string& message) {
  notes_.emplace_back();
  notes_.back().str("section", section).str("status", status).str("message", message);
}

namespace {
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) out += strf("\\u%04x", c);
        else out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string json_object(const Report::Fields& fields) {
  std::string out = "{";
  for (size_t i = 0; i < fields.size(); ++i) {
    const auto& v = fields[i].second;
    out += (i ? ", " : "") + json_string(fields[i].first) + ": ";
    if (v.kind == Report::Value::Str) out += json_string(v.str);
    else if (v.kind == Report::Value::Bool) out += v.flag ? "true" : "false";
    else if (!std::isfinite(v.num)) out += "null";
    else if (v.num == std::floor(v.num) && std::fabs(v.num) < 9e15) out += strf("%.0f", v.num);
    else out += strf("%.6g", v.num);
  }
  return out + "}";
}

std::string json_array(const std::vector<Report::Record>& records) {
  std::string out = "[";
  for (size_t i = 0; i < records.size(); ++i) out += std::string(i ? ",\n    " : "\n    ") + json_object(records[i].fields);
  return out + (records.empty() ? "]" : "\n  ]");
}
}  // namespace

bool Report::write(const std::string& path) const {
  std::string text = "{\n  \"bench\": " + json_string(bench_) + ",\n  \"meta\": " + json_object(meta_.fields) +
                     ",\n  \"anchors\": " + json_object(anchors_.fields) + ",\n  \"results\": " +
                     json_array(records_) + ",\n  \"notes\": " + json_array(notes_) + "\n}\n";
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "error: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) std::fprintf(stderr, "error: writing %s failed\n", path.c_str());
  return ok;
}

}  // namespace dt::bench
