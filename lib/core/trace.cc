#include "core/trace.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <vector>

#include "core/rank_scope.h"

namespace dt {
namespace {

struct Event {
  const char* cat;
  std::string name;
  int track;
  double start, end;
};

std::atomic<bool> g_on{false};
std::mutex g_mu;
std::vector<Event> g_events;
std::chrono::steady_clock::time_point g_t0 = std::chrono::steady_clock::now();

// JSON string body: names are ours (ASCII), but quote and backslash safely anyway.
std::string escaped(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) r += c;
  }
  return r;
}

}  // namespace

void trace_enable(bool on) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (on) {
    g_events.clear();
    g_t0 = std::chrono::steady_clock::now();
  }
  g_on.store(on, std::memory_order_relaxed);
}

bool trace_enabled() { return g_on.load(std::memory_order_relaxed); }

double trace_now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - g_t0).count();
}

void trace_record(const char* cat, const std::string& name, int track, double start_us, double end_us) {
  if (!trace_enabled()) return;
  std::lock_guard<std::mutex> lock(g_mu);
  g_events.push_back({cat, name, track, start_us, end_us < start_us ? start_us : end_us});
}

std::string trace_json() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  std::set<int> tracks;
  char buf[160];
  bool first = true;
  for (const Event& e : g_events) {
    tracks.insert(e.track);
    std::snprintf(buf, sizeof buf, "\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}", e.cat,
                  e.track, e.start, e.end - e.start);
    out += std::string(first ? "" : ",") + "{\"name\":\"" + escaped(e.name) + buf;
    first = false;
  }
  for (int t : tracks) {  // name the tracks: "rank 0", "rank 0 comm", ...
    std::snprintf(buf, sizeof buf,
                  "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,\"args\":{\"name\":\"rank %d%s\"}}",
                  first ? "" : ",", t, t / 2, t % 2 ? " comm" : " compute");
    out += buf;
    first = false;
  }
  return out + "]}";
}

int trace_current_rank() { return current_rank() < 0 ? 0 : current_rank(); }

TraceSpan::TraceSpan(const char* cat, std::string name) : cat_(cat) {
  if (!trace_enabled()) return;
  name_ = std::move(name);
  start_ = trace_now_us();
}

TraceSpan::~TraceSpan() {
  if (start_ >= 0) trace_record(cat_, name_, trace_track(trace_current_rank(), false), start_, trace_now_us());
}

}  // namespace dt
