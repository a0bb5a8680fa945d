// Shared by the benchmarks: command line, timing with medians, progress lines and a small
// JSON report. Every figure a benchmark prints is a median over timed runs that follow a
// warm-up run (the warm-up also pays for the first touch of fresh pages, which is slow on
// the reference machine), and every benchmark prints ratios against anchors measured in
// the same run (common/anchors.h), because the machine is shared and noisy.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace dt::bench {

struct Options {
  int threads = 0;         // 0: leave the library default
  bool quick = false;      // fewer shapes and runs (the ctest smoke test)
  std::string json_path;   // also write every figure here
  std::string filter;      // only items whose name contains this
  std::vector<std::pair<std::string, std::string>> extra;  // --key value pairs the caller accepts
};

// Parses --threads N, --quick, --json PATH, --filter S, --help, and any "--key value" whose
// key is in `extra_keys`. Prints `usage` and exits 0 on --help, exits 2 on a bad argument.
Options parse_args(int argc, char** argv, const std::string& usage, const std::vector<std::string>& extra_keys = {});
// The value given for an extra key, or `fallback`.
std::string option_value(const Options& o, const std::string& key, const std::string& fallback);

bool selected(const Options& o, const std::string& name);

// Timing. The clock is steady_clock, in seconds.
double now_s();
// all_to_all_v's uneven counts (bench_collectives and its Open MPI side): rank r sends peer
// p piece x 2 (1 + (r + p) mod n) / (n + 1) elements, from 2 / (n + 1) to 2n / (n + 1) of
// the equal split's piece (about n x piece in all). Symmetric in r and p, so what r receives
// from p is what it sends to p.
inline int64_t uneven_count(int64_t piece, int r, int p, int n) {
  return piece * 2 * (1 + (r + p) % n) / (n + 1);
}
double median(std::vector<double> v);

struct Stats {
  double median_s = 0, min_s = 0, max_s = 0;
  int reps = 0;
};

// How many timed runs: enough to fill about `seconds`, within [min_reps, max_reps].
struct Budget {
  double seconds = 0.5;
  int min_reps = 5;
  int max_reps = 50;
};

// Runs every fn once (warm-up), then `reps` rounds in which each fn runs once, in order,
// so that the variants of one item see the same load on a shared machine. reps follows
// from the first timed round and `budget`. Returns one Stats per fn.
std::vector<Stats> time_interleaved(const std::vector<std::function<void()>>& fns, const Budget& budget);
inline Stats time_one(const std::function<void()>& fn, const Budget& budget) {
  return time_interleaved({fn}, budget)[0];
}

// A progress line on stderr ("[section i/n] name"), for long runs.
void progress(const std::string& section, int index, int count, const std::string& name);

// The first three fields of /proc/loadavg ("?" where unreadable): printed with the figures,
// since other work on a shared machine moves them.
std::string load_average();

// Formats like printf into a std::string.
std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// The JSON report: top-level metadata, anchors, one record per measured item, and the
// sections that were skipped or failed.
class Report {
 public:
  struct Value {
    enum Kind { Num, Str, Bool } kind = Num;
    double num = 0;
    std::string str;
    bool flag = false;
  };
  using Fields = std::vector<std::pair<std::string, Value>>;

  class Record {
   public:
    Record& num(const std::string& key, double v);
    Record& str(const std::string& key, const std::string& v);
    Record& flag(const std::string& key, bool v);
    Fields fields;
  };

  explicit Report(std::string bench_name);
  Record& meta() { return meta_; }
  Record& anchors() { return anchors_; }
  Record& add(const std::string& section, const std::string& name);
  void note(const std::string& section, const std::string& status, const std::string& message);
  // Writes the report; false (and a message on stderr) when the file cannot be written.
  bool write(const std::string& path) const;

 private:
  std::string bench_;
  Record meta_, anchors_;
  std::vector<Record> records_;
  std::vector<Record> notes_;
};

}  // namespace dt::bench
