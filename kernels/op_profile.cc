// Opt-in op profiling (ops.h): per-op wall time and call counts, outermost op per thread.
#include <chrono>
#include <map>
#include <mutex>

#include "kernels/ops.h"

namespace dt::kernels {
namespace detail {

bool g_op_profiling = false;

namespace {
struct Acc {
  double seconds = 0.0;
  int64_t calls = 0;
};
std::mutex g_mu;
std::map<std::string, Acc>& accs() {
  static std::map<std::string, Acc> m;
  return m;
}
thread_local int t_depth = 0;
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

OpTimer::OpTimer(const char* name) : name_(name), outer_(t_depth++ == 0) {
  if (outer_) t0_ns_ = now_ns();
}

OpTimer::~OpTimer() {
  --t_depth;
  if (!outer_) return;
  double s = static_cast<double>(now_ns() - t0_ns_) * 1e-9;
  std::lock_guard<std::mutex> lock(g_mu);
  Acc& a = accs()[name_];
  a.seconds += s;
  a.calls += 1;
}

}  // namespace detail

void set_op_profiling(bool on) { detail::g_op_profiling = on; }

void reset_op_profile() {
  std::lock_guard<std::mutex> lock(detail::g_mu);
  detail::accs().clear();
}

std::vector<OpProfileEntry> op_profile() {
  std::lock_guard<std::mutex> lock(detail::g_mu);
  std::vector<OpProfileEntry> out;
  for (const auto& [name, a] : detail::accs()) out.push_back({name, a.seconds, a.calls});
  return out;
}

}  // namespace dt::kernels
