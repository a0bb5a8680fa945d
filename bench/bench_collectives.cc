// bench_collectives: the local backend's collectives (all-reduce sum f32, all-gather,
// reduce-scatter, broadcast, all-to-all) at 4 KiB .. 256 MiB on 2 and 4 ranks, against
// Open MPI's own collectives measured in the same run (bench/mpi/bench_mpi_collectives,
// started through mpirun), and against the memcpy anchor (common/anchors.h).
//
// Sizes and bandwidths follow nccl-tests: "size" is the all-reduce and broadcast buffer,
// the all-gather RECEIVE buffer (n x each rank's piece), the reduce-scatter send buffer
// (n x each rank's block), each rank's all-to-all send buffer. algbw = size / time;
// busbw = algbw x 2(n-1)/n (all-reduce), x (n-1)/n (all-gather, reduce-scatter,
// all-to-all), x 1 (broadcast). GB/s are 1e9 bytes per second.
//
// Timing, the same on both sides: buffers allocated and touched once per size and reused;
// a first call, then warm-up calls for about 0.2 s (0.03 s with --quick); a calibration
// that sizes `iters` (back-to-back calls per repeat, so a repeat lasts about a millisecond
// or more) and the number of repeats; every repeat starts at a barrier, and its time is
// the slowest rank's; the figure is the median repeat, per call. Results are checked at a
// few places after timing. The local side also reports how often two rank threads ended a
// repeat on the same core (the kernel places them; Open MPI binds its processes): on a
// shared machine that, more than the algorithm, decides small-message latency.
//
//   bench_collectives [--quick] [--json PATH] [--ranks 2,4] [--ops all_reduce,...]
//                     [--max-size 256M] [--mpi-bench PATH]
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <vector>

#include "comm/mesh.h"
#include "common/anchors.h"
#include "common/bench_util.h"

namespace dt::bench {
namespace {

using comm::Communicator;
using comm::Mesh;

// ---- the collectives ---------------------------------------------------------------------

enum class Op { AllReduce, AllGather, ReduceScatter, Broadcast, AllToAll, AllToAllV };

struct OpInfo {
  Op op;
  const char* name;
  const char* size_is;     // what "size" counts, for the table header
  const char* bus_formula;
  double bus_factor(int n) const {
    if (op == Op::AllReduce) return 2.0 * (n - 1) / n;
    if (op == Op::Broadcast) return 1.0;
    return static_cast<double>(n - 1) / n;
  }
};

const OpInfo kOps[] = {
    {Op::AllReduce, "all_reduce", "each rank's send and recv buffer", "2(n-1)/n"},
    {Op::AllGather, "all_gather", "the receive buffer, n x each rank's piece", "(n-1)/n"},
    {Op::ReduceScatter, "reduce_scatter", "each rank's send buffer, n x the block it receives", "(n-1)/n"},
    {Op::Broadcast, "broadcast", "the buffer (root 0; out of place)", "1"},
    {Op::AllToAll, "all_to_all", "each rank's send buffer, n x the part per peer", "(n-1)/n"},
    {Op::AllToAllV, "all_to_all_v", "n x the equal part per peer; uneven counts (uneven_count), as MoE routing makes",
     "(n-1)/n"},
};

// Elements of the "size" buffer: bytes / 4 rounded down to a multiple of n (the MPI side
// does the same), so every rank's piece is whole.
int64_t size_elems(long long bytes, int n) { return bytes / 4 / n * n; }

struct Timing {
  bool have = false;
  bool ok = true;  // the result check passed
  double median_s = 0, min_s = 0, max_s = 0;
  int reps = 0, iters = 0;
  double shared_core = 0;  // local: the fraction of repeats that ended with two ranks on one core
};

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float, FreeDeleter>;

Buffer alloc_floats(int64_t count) {
  size_t bytes = static_cast<size_t>(std::max<int64_t>(count, 16)) * sizeof(float);
  bytes = (bytes + 4095) / 4096 * 4096;
  Buffer b(static_cast<float*>(std::aligned_alloc(4096, bytes)));
  if (!b) throw std::bad_alloc();
  return b;
}

// Warm-up calls after the first: enough to fill about 0.2 s (quick: 0.03 s), so that the
// scheduler has placed the threads and the caches hold what they will before timing.
int warmup_calls(double per_call_s, bool quick) {
  const double warm_s = quick ? 0.03 : 0.2;
  return std::clamp(static_cast<int>(warm_s / std::max(per_call_s, 1e-9)), 0, 100000);
}

// Iterations per repeat and repeats, from the slowest rank's calibration time per call.
void plan(double per_call_s, bool quick, int& iters, int& reps) {
  const double rep_s = quick ? 2e-4 : 1e-3, budget_s = quick ? 0.02 : 0.4;
  const int min_reps = quick ? 3 : 7, max_reps = quick ? 7 : 31;
  iters = std::clamp(static_cast<int>(std::ceil(rep_s / std::max(per_call_s, 1e-9))), 1, 2000);
  reps = std::clamp(static_cast<int>(budget_s / std::max(per_call_s * iters, 1e-9)), min_reps, max_reps);
}

// One size of one collective on the local backend (every rank of `mesh`, group "world").
Timing time_local(Mesh& mesh, const OpInfo& info, long long bytes, bool quick) {
  const int n = mesh.world_size();
  const int64_t elems = size_elems(bytes, n), piece = elems / n;
  int64_t send_count = elems, recv_count = elems;
  if (info.op == Op::AllGather) send_count = piece;
  if (info.op == Op::ReduceScatter) recv_count = piece;
  std::vector<std::vector<double>> calib(2, std::vector<double>(n, 0.0));
  std::vector<std::vector<double>> times(n);
  std::vector<std::vector<int>> cpus(n);
  std::vector<int> ok(n, 1);
  int iters = 1, reps = 1;

  mesh.run([&](int, int rank) {
    Communicator& c = mesh.comm(rank, "world");
    Buffer send = alloc_floats(send_count), recv = alloc_floats(recv_count);
    // Rank r sends r + 1 everywhere: every expected result is a small exact integer.
    std::fill(send.get(), send.get() + send_count, static_cast<float>(rank + 1));
    std::fill(recv.get(), recv.get() + recv_count, -1.0f);
    const std::vector<int64_t> counts(n, piece);
    std::vector<int64_t> uneven(n);  // all_to_all_v: the same counts both ways (symmetric)
    for (int p = 0; p < n; ++p) uneven[p] = uneven_count(piece, rank, p, n);
    auto call = [&] {
      switch (info.op) {
        case Op::AllReduce: c.all_reduce(send.get(), recv.get(), elems, DType::F32, comm::ReduceOp::Sum); break;
        case Op::AllGather: c.all_gather(send.get(), recv.get(), piece, DType::F32); break;
        case Op::ReduceScatter: c.reduce_scatter(send.get(), recv.get(), piece, DType::F32, comm::ReduceOp::Sum); break;
        case Op::Broadcast: c.broadcast(send.get(), recv.get(), elems, DType::F32, 0); break;
        case Op::AllToAll: c.all_to_all(send.get(), counts, recv.get(), counts, DType::F32); break;
        case Op::AllToAllV: c.all_to_all(send.get(), uneven, recv.get(), uneven, DType::F32); break;
      }
    };
    // Every rank reads the same calibrations (after a barrier), so all plan the same loops.
    auto calibrate = [&](std::vector<double>& out) {
      c.barrier();
      double t0 = now_s();
      for (int i = 0; i < 2; ++i) call();
      out[rank] = (now_s() - t0) / 2;
      c.barrier();
      return *std::max_element(out.begin(), out.end());
    };
    call();  // first call: lazy setup
    int my_iters = 1, my_reps = 1;
    for (int i = 0, warm = warmup_calls(calibrate(calib[0]), quick); i < warm; ++i) call();
    plan(calibrate(calib[1]), quick, my_iters, my_reps);
    for (int r = 0; r < my_reps; ++r) {
      c.barrier();
      double s = now_s();
      for (int i = 0; i < my_iters; ++i) call();
      times[rank].push_back((now_s() - s) / my_iters);
      cpus[rank].push_back(sched_getcpu());
    }
    if (rank == 0) iters = my_iters, reps = my_reps;
    const float sum = static_cast<float>(n) * static_cast<float>(n + 1) / 2;
    for (int64_t i : {int64_t{0}, recv_count / 2, recv_count - 1}) {
      float expect = 1.0f;  // broadcast
      if (info.op == Op::AllReduce || info.op == Op::ReduceScatter) expect = sum;
      if (info.op == Op::AllGather || info.op == Op::AllToAll) expect = static_cast<float>(i / piece + 1);
      if (info.op != Op::AllToAllV && recv.get()[i] != expect) ok[rank] = 0;
    }
    for (int64_t p = 0, at = 0; info.op == Op::AllToAllV && p < n; at += uneven[p], ++p)  // each peer's first and last
      if (uneven[p] > 0 && (recv.get()[at] != p + 1 || recv.get()[at + uneven[p] - 1] != p + 1)) ok[rank] = 0;
  });

  Timing t;
  t.have = true;
  t.iters = iters;
  t.reps = reps;
  std::vector<double> slowest(reps, 0.0);
  for (int r = 0; r < reps; ++r)
    for (int k = 0; k < n; ++k) slowest[r] = std::max(slowest[r], times[k][r]);
  t.median_s = median(slowest);
  t.min_s = *std::min_element(slowest.begin(), slowest.end());
  t.max_s = *std::max_element(slowest.begin(), slowest.end());
  t.ok = std::all_of(ok.begin(), ok.end(), [](int v) { return v == 1; });
  int shared = 0;
  for (int r = 0; r < reps; ++r) {
    std::vector<int> at_end;
    for (int k = 0; k < n; ++k) at_end.push_back(cpus[k][r]);
    std::sort(at_end.begin(), at_end.end());
    shared += std::adjacent_find(at_end.begin(), at_end.end()) != at_end.end();
  }
  t.shared_core = static_cast<double>(shared) / reps;
  return t;
}

// ---- Open MPI, through mpirun ------------------------------------------------------------

struct MpiSide {
  std::string mpirun, program;  // empty when not found
  std::string why_not;          // why Open MPI is skipped, when it is
  std::string library;          // "Open MPI v4.1.4", from the program
};

std::string dir_of_self() {
  char buf[4096];
  ssize_t len = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (len <= 0) return ".";
  std::string p(buf, static_cast<size_t>(len));
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

std::string find_in_path(const std::string& exe) {
  const char* path = std::getenv("PATH");
  std::string s = path ? path : "/usr/bin:/bin";
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t colon = s.find(':', pos);
    std::string dir = s.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
    std::string cand = (dir.empty() ? "." : dir) + "/" + exe;
    if (access(cand.c_str(), X_OK) == 0) return cand;
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  return "";
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

MpiSide find_mpi(const std::string& given) {
  MpiSide m;
  if (!given.empty()) {
    if (access(given.c_str(), X_OK) == 0) m.program = given;
    else m.why_not = "--mpi-bench " + given + " is not an executable file";
  } else {
    std::string dir = dir_of_self();
    for (std::string cand : {dir + "/bench_mpi_collectives", dir + "/mpi/bench_mpi_collectives"})
      if (access(cand.c_str(), X_OK) == 0) {
        m.program = cand;
        break;
      }
    if (m.program.empty())
      m.why_not = "bench_mpi_collectives not found next to this executable (" + dir +
                  "; built only with DTRAIN_WITH_MPI) and no --mpi-bench PATH";
  }
  m.mpirun = find_in_path("mpirun");
  if (m.mpirun.empty() && m.why_not.empty()) m.why_not = "mpirun not found in PATH";
  if (!m.why_not.empty()) m.program.clear(), m.mpirun.clear();
  return m;
}

// The value of "key" in a flat one-line JSON object (numbers, strings, booleans), or "".
std::string json_field(const std::string& line, const std::string& key) {
  std::string pat = "\"" + key + "\":";
  size_t p = line.find(pat);
  if (p == std::string::npos) return "";
  p += pat.size();
  while (p < line.size() && line[p] == ' ') ++p;
  if (p < line.size() && line[p] == '"') {
    size_t end = line.find('"', p + 1);
    return end == std::string::npos ? "" : line.substr(p + 1, end - p - 1);
  }
  size_t end = line.find_first_of(",}", p);
  return line.substr(p, end == std::string::npos ? std::string::npos : end - p);
}

// Runs every size of one collective on n MPI processes. Returns timings by size; on a
// failure, an empty map and `why`.
std::map<long long, Timing> time_mpi(MpiSide& m, const OpInfo& info, int n, const std::vector<long long>& sizes,
                                     bool quick, std::string& why) {
  std::map<long long, Timing> out;
  std::string list;
  for (long long b : sizes) list += (list.empty() ? "" : ",") + std::to_string(b);
  std::string cmd = shell_quote(m.mpirun) + " -np " + std::to_string(n) + " --oversubscribe " +
                    shell_quote(m.program) + " --op " + info.name + " --sizes " + list + (quick ? " --quick" : "") +
                    " 2>&1";
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  std::fflush(stdout);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) {
    why = std::string("popen failed: ") + std::strerror(errno);
    return {};
  }
  std::string last_other;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), pipe)) {
    std::string line(buf);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (line.rfind("{", 0) != 0) {  // mpirun's or the program's own messages
      if (!line.empty()) {
        std::fprintf(stderr, "  mpirun: %s\n", line.c_str());
        last_other = line;
      }
      continue;
    }
    std::string lib = json_field(line, "library");
    if (!lib.empty()) {
      m.library = lib;
      continue;
    }
    Timing t;
    t.have = true;
    t.median_s = std::atof(json_field(line, "median_s").c_str());
    t.min_s = std::atof(json_field(line, "min_s").c_str());
    t.max_s = std::atof(json_field(line, "max_s").c_str());
    t.reps = std::atoi(json_field(line, "reps").c_str());
    t.iters = std::atoi(json_field(line, "iters").c_str());
    t.ok = json_field(line, "ok") == "true";
    out[std::atoll(json_field(line, "bytes").c_str())] = t;
  }
  int status = pclose(pipe);
  if (status != 0 || out.size() != sizes.size()) {
    why = status == -1 ? "pclose failed"
          : WIFEXITED(status) ? "mpirun exited with status " + std::to_string(WEXITSTATUS(status))
                              : "mpirun ended abnormally";
    if (status == 0) why = "mpirun printed " + std::to_string(out.size()) + " of " + std::to_string(sizes.size()) + " sizes";
    if (!last_other.empty()) why += ": " + last_other;
    return {};
  }
  return out;
}

// ---- options, output -----------------------------------------------------------------------

long long parse_size(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string unit = end ? std::string(end) : "";
  double mul = 1;
  if (unit == "K" || unit == "KiB" || unit == "k") mul = 1024.0;
  else if (unit == "M" || unit == "MiB" || unit == "m") mul = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB" || unit == "g") mul = 1024.0 * 1024 * 1024;
  else if (!unit.empty()) return -1;
  if (s.empty() || end == s.c_str() || v <= 0) return -1;
  return static_cast<long long>(v * mul);
}

std::string size_label(long long bytes) {
  if (bytes >= (1LL << 30) && bytes % (1LL << 30) == 0) return std::to_string(bytes >> 30) + "G";
  if (bytes >= (1LL << 20) && bytes % (1LL << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes >= (1LL << 10) && bytes % (1LL << 10) == 0) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

// Time for a table: microseconds below 10 ms, milliseconds above.
std::string fmt_time(double s) {
  if (s <= 0) return "-";
  return s < 1e-2 ? strf("%.1f us", s * 1e6) : strf("%.2f ms", s * 1e3);
}

struct Row {
  const OpInfo* info;
  int ranks;
  long long bytes;  // the size, as measured (rounded to whole pieces)
  Timing local, mpi;
  double algbw() const { return local.have ? bytes / local.median_s / 1e9 : 0; }
  double busbw() const { return algbw() * info->bus_factor(ranks); }
  double mpi_busbw() const { return mpi.have ? bytes / mpi.median_s / 1e9 * info->bus_factor(ranks) : 0; }
  double speedup() const { return local.have && mpi.have ? mpi.median_s / local.median_s : 0; }
};

[[noreturn]] void usage_error(const std::string& usage, const std::string& message) {
  std::fprintf(stderr, "error: %s\n\n%s", message.c_str(), usage.c_str());
  std::exit(2);
}

}  // namespace
}  // namespace dt::bench

int main(int argc, char** argv) {
  using namespace dt::bench;
  const std::string usage =
      "usage: bench_collectives [--quick] [--json PATH] [--ranks 2,4] [--ops all_reduce,...]\n"
      "                         [--max-size 256M] [--mpi-bench PATH]\n"
      "  --quick          sizes up to 1 MiB, few repeats (< 30 s; the ctest smoke test)\n"
      "  --json PATH      also write every figure to PATH as JSON\n"
      "  --ranks LIST     rank counts (default 2,4)\n"
      "  --ops LIST       all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, all_to_all_v (default all)\n"
      "  --max-size S     largest message, e.g. 64M (default 256M; sizes are 4K x powers of 4)\n"
      "  --mpi-bench PATH the Open MPI program (default: bench_mpi_collectives next to this one)\n";
  Options opt = parse_args(argc, argv, usage, {"ranks", "ops", "max-size", "mpi-bench"});
  if (opt.threads > 0 || !opt.filter.empty()) usage_error(usage, "--threads and --filter do not apply here");

  std::vector<int> ranks;
  for (const std::string& r : split(option_value(opt, "ranks", "2,4"))) {
    char* end = nullptr;
    long v = std::strtol(r.c_str(), &end, 10);
    if (*end != '\0' || v < 2 || v > 64) usage_error(usage, "--ranks " + r + ": accepted 2..64");
    ranks.push_back(static_cast<int>(v));
  }
  std::vector<const OpInfo*> ops;
  for (const std::string& name : split(option_value(opt, "ops", "all"))) {
    if (name == "all") {
      for (const OpInfo& o : kOps) ops.push_back(&o);
      continue;
    }
    auto it = std::find_if(std::begin(kOps), std::end(kOps), [&](const OpInfo& o) { return name == o.name; });
    if (it == std::end(kOps)) usage_error(usage, "--ops " + name + ": unknown collective");
    ops.push_back(&*it);
  }
  long long max_size = parse_size(option_value(opt, "max-size", opt.quick ? "1M" : "256M"));
  if (max_size < 4096) usage_error(usage, "--max-size: a size of at least 4K, e.g. 64M");
  if (opt.quick) max_size = std::min(max_size, 1LL << 20);
  std::vector<long long> sizes;
  for (long long b = 4096; b <= max_size; b *= 4) sizes.push_back(b);
  if (ranks.empty() || ops.empty()) usage_error(usage, "nothing to measure");

  Report report("bench_collectives");
  std::string load_before = load_average();
  std::printf("bench_collectives: local backend vs Open MPI collectives, f32, %s run\n", opt.quick ? "quick" : "full");
  std::printf("figures are medians of timed repeats after a warm-up, per call; each repeat starts at a barrier\n"
              "and counts the slowest rank; GB/s = 1e9 B/s. size, algbw, busbw as in nccl-tests\n"
              "(all-gather size = the receive buffer, n x each rank's piece). 'shared core': the share of\n"
              "timed repeats after which two local rank threads were on the same core (sched_getcpu);\n"
              "Open MPI binds each process to its own core when there are enough cores.\n");
  std::printf("load average at start: %s\n\n", load_before.c_str());

  // The memcpy anchor: 1 and 2 threads, past glibc's non-temporal threshold (the quick run
  // copies less). It counts read + write bytes.
  progress("anchor", 1, 1, "memcpy bandwidth");
  size_t copy_bytes = (opt.quick ? size_t{256} : size_t{1024}) << 20;
  std::vector<CopyBandwidth> copies = measure_copy_bandwidth(copy_bytes, {1, 2}, opt.quick);
  double copy_rw_2t = 0;
  std::printf("== anchor: memcpy (medians; best in brackets)\n");
  for (const CopyBandwidth& c : copies) {
    std::printf("memcpy 2 x %zu MiB, %d thread%s: %6.1f GB/s [%.1f] counting read + write bytes "
                "(= %.1f GB/s of bytes copied), %d runs\n",
                c.bytes >> 20, c.threads, c.threads == 1 ? " " : "s", c.median_gbps, c.best_gbps, c.median_gbps / 2,
                c.reps);
    std::string k = strf("memcpy_gbps_%dt", c.threads);
    report.anchors().num(k, c.median_gbps).num(k + "_best", c.best_gbps).num(strf("memcpy_reps_%dt", c.threads), c.reps);
    if (c.threads == 2) copy_rw_2t = c.median_gbps;
  }
  report.anchors().num("memcpy_buffer_bytes", static_cast<double>(copy_bytes)).str("memcpy_counts", "read+write");
  std::printf("busbw/memcpy below divides by the 2-thread figure, read + write bytes (%.1f GB/s)\n\n", copy_rw_2t);

  MpiSide mpi = find_mpi(option_value(opt, "mpi-bench", ""));
  if (!mpi.why_not.empty()) {
    std::printf("Open MPI: skipped (%s)\n\n", mpi.why_not.c_str());
    report.note("mpi", "skipped", mpi.why_not);
  }

  bool failed = false;
  std::vector<Row> rows;
  for (int n : ranks) {
    std::shared_ptr<Mesh> mesh;
    try {
      dt::comm::BackendOptions bo;
      bo.timeout_s = 600;
      mesh = Mesh::create("local", {n, 1, 1, 1, 1}, bo);
    } catch (const std::exception& e) {
      std::printf("local, %d ranks: failed to create the mesh: %s\n", n, e.what());
      report.note("local", "failed", e.what());
      failed = true;
      continue;
    }
    for (const OpInfo* info : ops) {
      std::vector<Row> table;
      int index = 0;
      for (long long b : sizes) {
        Row row{info, n, size_elems(b, n) * 4, {}, {}};
        progress(strf("local n=%d", n), ++index, static_cast<int>(sizes.size()), strf("%s %s", info->name, size_label(b).c_str()));
        try {
          row.local = time_local(*mesh, *info, b, opt.quick);
        } catch (const std::exception& e) {
          std::printf("local %s %s, %d ranks: failed: %s\n", info->name, size_label(b).c_str(), n, e.what());
          report.note("local", "failed", strf("%s %s n=%d: %s", info->name, size_label(b).c_str(), n, e.what()));
          failed = true;
        }
        table.push_back(row);
      }
      if (!mpi.program.empty()) {
        progress(strf("mpi n=%d", n), 1, 1, strf("%s, all sizes (mpirun)", info->name));
        std::string why;
        std::map<long long, Timing> got = time_mpi(mpi, *info, n, sizes, opt.quick, why);
        if (got.empty()) {
          std::printf("Open MPI: skipped (%s %d ranks: %s)\n", info->name, n, why.c_str());
          report.note("mpi", "skipped", strf("%s n=%d: %s", info->name, n, why.c_str()));
        }
        for (Row& row : table) {
          auto it = got.find(row.bytes);
          if (it != got.end()) row.mpi = it->second;
        }
      }

      const int cores = static_cast<int>(std::thread::hardware_concurrency());
      std::printf("== %s, %d ranks%s  [size: %s; busbw = algbw x %s]\n", info->name, n,
                  n > cores ? strf(" (more ranks than the %d cores: oversubscribed)", cores).c_str() : "", info->size_is,
                  info->bus_formula);
      std::printf("%6s | %10s %8s %8s %6s | %10s %8s | %8s | %14s\n", "", "local", "algbw", "busbw", "shared",
                  "Open MPI", "busbw", "speedup", "busbw/memcpy");
      std::printf("%6s | %10s %8s %8s %6s | %10s %8s | %8s | %6s %7s\n", "size", "time", "GB/s", "GB/s", "core",
                  "time", "GB/s", "MPI/loc", "local", "MPI");
      for (const Row& r : table) {
        std::string flag = (!r.local.ok ? "  LOCAL RESULT WRONG" : "") + std::string(r.mpi.have && !r.mpi.ok ? "  MPI RESULT WRONG" : "");
        if (!r.local.ok || (r.mpi.have && !r.mpi.ok)) failed = true;
        std::printf("%6s | %10s %8.2f %8.2f %5.0f%% | %10s %8s | %8s | %6.3f %7s%s\n", size_label(r.bytes).c_str(),
                    fmt_time(r.local.median_s).c_str(), r.algbw(), r.busbw(), 100 * r.local.shared_core,
                    r.mpi.have ? fmt_time(r.mpi.median_s).c_str() : "-",
                    r.mpi.have ? strf("%.2f", r.mpi_busbw()).c_str() : "-",
                    r.mpi.have ? strf("%.2fx", r.speedup()).c_str() : "-", copy_rw_2t > 0 ? r.busbw() / copy_rw_2t : 0.0,
                    r.mpi.have && copy_rw_2t > 0 ? strf("%.3f", r.mpi_busbw() / copy_rw_2t).c_str() : "-", flag.c_str());
        auto& rec = report.add(info->name, strf("%s/n%d/%s", info->name, n, size_label(r.bytes).c_str()));
        rec.num("ranks", n).num("bytes", static_cast<double>(r.bytes)).num("bus_factor", info->bus_factor(n));
        rec.num("local_time_s", r.local.median_s).num("local_min_s", r.local.min_s).num("local_max_s", r.local.max_s);
        rec.num("local_shared_core_frac", r.local.shared_core);
        rec.num("local_reps", r.local.reps).num("local_iters", r.local.iters).flag("local_ok", r.local.ok);
        rec.num("local_algbw_gbps", r.algbw()).num("local_busbw_gbps", r.busbw());
        rec.num("local_busbw_over_memcpy_2t", copy_rw_2t > 0 ? r.busbw() / copy_rw_2t : 0.0);
        rec.flag("mpi_measured", r.mpi.have);
        if (r.mpi.have) {
          rec.num("mpi_time_s", r.mpi.median_s).num("mpi_min_s", r.mpi.min_s).num("mpi_max_s", r.mpi.max_s);
          rec.num("mpi_reps", r.mpi.reps).num("mpi_iters", r.mpi.iters).flag("mpi_ok", r.mpi.ok);
          rec.num("mpi_algbw_gbps", r.bytes / r.mpi.median_s / 1e9).num("mpi_busbw_gbps", r.mpi_busbw());
          rec.num("speedup_mpi_over_local", r.speedup());
        }
        rows.push_back(r);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  if (!mpi.library.empty()) std::printf("Open MPI library: %s\n", mpi.library.c_str());

  // ---- the targets: printed, never asserted (exit 0 either way) -------------------
  auto find = [&](Op op, int n, long long bytes) -> const Row* {
    for (const Row& r : rows)
      if (r.info->op == op && r.ranks == n && r.bytes == bytes && r.local.have) return &r;
    return nullptr;
  };
  auto verdict = [](bool pass) { return pass ? "PASS" : "MISS"; };
  auto& targets = report.add("targets", "targets");
  std::printf("== targets (medians; not assertions)\n");
  const Row* big = find(Op::AllReduce, 2, 64LL << 20);
  if (!big) {
    std::printf("(a) all_reduce 64M, 2 ranks: not measured (needs --ranks with 2, all_reduce, --max-size >= 64M, no --quick)\n");
  } else {
    if (big->mpi.have) {
      bool pass = big->speedup() >= 5.0;
      std::printf("(a1) all_reduce 64M, 2 ranks, speedup over Open MPI >= 5x: local %s, Open MPI %s -> %.2fx: %s\n",
                  fmt_time(big->local.median_s).c_str(), fmt_time(big->mpi.median_s).c_str(), big->speedup(), verdict(pass));
      targets.num("a1_speedup", big->speedup()).str("a1", verdict(pass));
    } else {
      std::printf("(a1) all_reduce 64M, 2 ranks, speedup over Open MPI >= 5x: Open MPI not measured\n");
    }
    double ratio = copy_rw_2t > 0 ? big->busbw() / copy_rw_2t : 0;
    bool pass = ratio >= 0.4;
    std::printf("(a2) all_reduce 64M, 2 ranks, busbw >= 0.4 x memcpy (2 threads): busbw %.2f GB/s / memcpy %.2f GB/s "
                "(read + write bytes, the anchor's convention) = %.3f: %s\n",
                big->busbw(), copy_rw_2t, ratio, verdict(pass));
    std::printf("     the same against memcpy counted in bytes copied (%.2f GB/s): %.3f: %s\n", copy_rw_2t / 2,
                2 * ratio, verdict(2 * ratio >= 0.4));
    targets.num("a2_busbw_gbps", big->busbw()).num("a2_memcpy_2t_rw_gbps", copy_rw_2t);
    targets.num("a2_ratio_rw", ratio).str("a2", verdict(pass)).num("a2_ratio_copied", 2 * ratio);
    targets.str("a2_copied", verdict(2 * ratio >= 0.4));
  }
  bool any_small = false;
  for (int n : ranks) {
    const Row* small = find(Op::AllReduce, n, 4096);
    if (!small) continue;
    any_small = true;
    if (!small->mpi.have) {
      std::printf("(b) all_reduce 4K, %d ranks, local latency <= Open MPI: Open MPI not measured\n", n);
      continue;
    }
    bool pass = small->local.median_s <= small->mpi.median_s;
    std::printf("(b) all_reduce 4K, %d ranks, local latency <= Open MPI: local %s, Open MPI %s (%.2fx): %s\n", n,
                fmt_time(small->local.median_s).c_str(), fmt_time(small->mpi.median_s).c_str(), small->speedup(),
                verdict(pass));
    targets.num(strf("b_n%d_local_s", n), small->local.median_s).num(strf("b_n%d_mpi_s", n), small->mpi.median_s);
    targets.str(strf("b_n%d", n), verdict(pass));
  }
  if (!any_small) std::printf("(b) all_reduce 4K: not measured (needs all_reduce in --ops)\n");
  // The other collectives at 4K, for information.
  for (const Row& r : rows)
    if (r.bytes == 4096 && r.info->op != Op::AllReduce && r.mpi.have)
      std::printf("    (info) %s 4K, %d ranks: local %s, Open MPI %s (%.2fx)\n", r.info->name, r.ranks,
                  fmt_time(r.local.median_s).c_str(), fmt_time(r.mpi.median_s).c_str(), r.speedup());

  std::string load_after = load_average();
  std::printf("\nload average at end: %s\n", load_after.c_str());
  std::string ranks_s, ops_s;
  for (int n : ranks) ranks_s += (ranks_s.empty() ? "" : ",") + std::to_string(n);
  for (const OpInfo* o : ops) ops_s += (ops_s.empty() ? "" : ",") + std::string(o->name);
  report.meta()
      .flag("quick", opt.quick)
      .str("ranks", ranks_s)
      .str("ops", ops_s)
      .num("max_size", static_cast<double>(max_size))
      .str("size_convention", "nccl-tests: all_gather = receive buffer; reduce_scatter, all_to_all = send buffer")
      .str("mpi_library", mpi.library)
      .str("load_before", load_before)
      .str("load_after", load_after)
      .flag("failed", failed);
  if (!opt.json_path.empty() && !report.write(opt.json_path)) return 1;
  return failed ? 1 : 0;
}
