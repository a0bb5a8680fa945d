// A Chrome trace-event recorder (the JSON that Perfetto and chrome://tracing open): spans
// of compute and communication per rank, so a timeline shows where the gradient all-reduce
// overlaps backward and where a rank sat waiting.
//
// Off by default; a span costs one relaxed atomic load when off. Spans land on tracks: each
// rank has a compute track and a comm track (trace_track(rank, comm)); a span goes to the
// tracks of its thread's current rank (core/rank_scope.h; rank 0 when it has none). Times are microseconds since the
// recorder was (re)enabled. Thread-safe.
#pragma once
#include <cstdint>
#include <string>

namespace dt {

void trace_enable(bool on);  // on: clears what was recorded and restarts the clock
bool trace_enabled();
double trace_now_us();
// A complete event on `track` ("cat" names its kind: compute, comm, idle).
void trace_record(const char* cat, const std::string& name, int track, double start_us, double end_us);
// The recorded events as one Chrome trace JSON object, with a name for every track.
std::string trace_json();

// The track of `rank`'s compute (comm = false) or communication (comm = true).
inline int trace_track(int rank, bool comm) { return 2 * rank + (comm ? 1 : 0); }

int trace_current_rank();  // current_rank(), or 0 when the thread has none

// A compute-track span of this thread's rank, from construction to destruction.
class TraceSpan {
 public:
  TraceSpan(const char* cat, std::string name);
  ~TraceSpan();
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  const char* cat_;
  std::string name_;
  double start_ = -1.0;
};

}  // namespace dt
