// bench_mpi_collectives: Open MPI's own collectives (MPI_Allreduce, MPI_Allgather,
// MPI_Reduce_scatter_block, MPI_Bcast, MPI_Alltoall, MPI_Alltoallv) on f32, timed exactly as
// bench_collectives times the local backend, for that benchmark to compare against. It is
// linked with MPI alone, not with libdtrain (only the dependency-free common/bench_util.cc
// for the clock and the median), and is meant to be started by bench_collectives:
//   mpirun -np N --oversubscribe bench_mpi_collectives --op all_reduce --sizes 4096,16384 [--quick]
// Rank 0 prints one JSON object per line on stdout: first {"library": ...}, then one per
// size: {"op", "ranks", "bytes", "median_s", "min_s", "max_s", "reps", "iters", "ok"}.
//
// Sizes follow nccl-tests: "bytes" is the all-reduce and broadcast buffer, the all-gather
// receive buffer (n x the piece of each rank), the reduce-scatter send buffer (n x the
// block each rank receives) and each rank's all-to-all send buffer (n x the part per peer).
//
// Timing: buffers are allocated and touched once per size and reused; a first call, warm-up
// calls for about 0.2 s (0.03 s with --quick), then a calibration that sizes `iters` (calls
// per timed repeat, so a repeat lasts at least about a millisecond) and `reps`; each repeat
// starts at a barrier and times `iters` back-to-back calls; the repeat's time is the
// slowest rank's; the figure is the median of the repeats, per call.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/bench_util.h"

namespace {

using dt::bench::median;
using dt::bench::now_s;
using dt::bench::strf;
using dt::bench::uneven_count;

struct Args {
  std::string op;
  std::vector<long long> sizes;
  bool quick = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "bench_mpi_collectives: %s\n"
               "usage: mpirun -np N bench_mpi_collectives --op OP --sizes B1,B2,... [--quick]\n"
               "  OP: all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, all_to_all_v (uneven counts)\n",
               why);
  MPI_Abort(MPI_COMM_WORLD, 2);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "--quick") {
      a.quick = true;
    } else if (k == "--op" && i + 1 < argc) {
      a.op = argv[++i];
    } else if (k == "--sizes" && i + 1 < argc) {
      std::string v = argv[++i];
      size_t pos = 0;
      while (pos <= v.size()) {
        size_t comma = v.find(',', pos);
        std::string item = v.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        char* end = nullptr;
        long long b = std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || b <= 0) usage(("bad size '" + item + "'").c_str());
        a.sizes.push_back(b);
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    } else {
      usage(("unknown argument '" + k + "'").c_str());
    }
  }
  static const char* kOps[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "all_to_all_v"};
  if (std::find_if(std::begin(kOps), std::end(kOps), [&](const char* o) { return a.op == o; }) == std::end(kOps))
    usage(("unknown --op '" + a.op + "'").c_str());
  if (a.sizes.empty()) usage("--sizes is required");
  return a;
}

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float, FreeDeleter>;

Buffer alloc_floats(long long count) {
  size_t bytes = static_cast<size_t>(std::max<long long>(count, 16)) * sizeof(float);
  bytes = (bytes + 4095) / 4096 * 4096;
  return Buffer(static_cast<float*>(std::aligned_alloc(4096, bytes)));
}

// One size of one collective; returns the JSON line (rank 0) or "".
std::string measure(const Args& a, long long bytes, int me, int n) {
  // Elements per rank piece: bytes / 4 rounded down to a multiple of n, as in bench_collectives.
  const long long elems = bytes / 4 / n * n;
  const long long piece = elems / n;
  long long send_count = elems, recv_count = elems;
  if (a.op == "all_gather") send_count = piece;
  if (a.op == "reduce_scatter") recv_count = piece;
  Buffer send = alloc_floats(send_count), recv = alloc_floats(recv_count);
  if (!send || !recv) {
    std::fprintf(stderr, "bench_mpi_collectives: cannot allocate %lld bytes\n", (send_count + recv_count) * 4);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  // Rank r sends r + 1 everywhere: every expected result is a small exact integer.
  std::fill(send.get(), send.get() + send_count, static_cast<float>(me + 1));
  std::fill(recv.get(), recv.get() + recv_count, -1.0f);
  const int ipiece = static_cast<int>(piece), ielems = static_cast<int>(elems);
  std::vector<int> counts(static_cast<size_t>(n)), displs(static_cast<size_t>(n));  // all_to_all_v
  for (int p = 0, at = 0; p < n; at += counts[static_cast<size_t>(p)], ++p) {
    counts[static_cast<size_t>(p)] = static_cast<int>(uneven_count(piece, me, p, n));
    displs[static_cast<size_t>(p)] = at;
  }
  auto call = [&] {
    if (a.op == "all_reduce") MPI_Allreduce(send.get(), recv.get(), ielems, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else if (a.op == "all_gather") MPI_Allgather(send.get(), ipiece, MPI_FLOAT, recv.get(), ipiece, MPI_FLOAT, MPI_COMM_WORLD);
    else if (a.op == "reduce_scatter")
      MPI_Reduce_scatter_block(send.get(), recv.get(), ipiece, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else if (a.op == "broadcast") MPI_Bcast(me == 0 ? send.get() : recv.get(), ielems, MPI_FLOAT, 0, MPI_COMM_WORLD);
    else if (a.op == "all_to_all")
      MPI_Alltoall(send.get(), ipiece, MPI_FLOAT, recv.get(), ipiece, MPI_FLOAT, MPI_COMM_WORLD);
    else
      MPI_Alltoallv(send.get(), counts.data(), displs.data(), MPI_FLOAT, recv.get(), counts.data(), displs.data(),
                    MPI_FLOAT, MPI_COMM_WORLD);
  };

  // First call, a calibration, warm-up calls for about 0.2 s (quick: 0.03 s), and a second
  // calibration that sizes iters and reps from the slowest rank's time per call.
  auto calibrate = [&] {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s();
    for (int i = 0; i < 2; ++i) call();
    double per_call = (now_s() - t0) / 2, slowest = 0;
    MPI_Allreduce(&per_call, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
  };
  call();
  const double warm_s = a.quick ? 0.03 : 0.2;
  const int warm = std::clamp(static_cast<int>(warm_s / std::max(calibrate(), 1e-9)), 0, 100000);
  for (int i = 0; i < warm; ++i) call();
  const double slowest = calibrate();
  const double rep_s = a.quick ? 2e-4 : 1e-3, budget_s = a.quick ? 0.02 : 0.4;
  const int min_reps = a.quick ? 3 : 7, max_reps = a.quick ? 7 : 31;
  int iters = std::clamp(static_cast<int>(std::ceil(rep_s / std::max(slowest, 1e-9))), 1, 2000);
  int reps = std::clamp(static_cast<int>(budget_s / std::max(slowest * iters, 1e-9)), min_reps, max_reps);

  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    double s = now_s();
    for (int i = 0; i < iters; ++i) call();
    double mine = (now_s() - s) / iters, worst = 0;
    MPI_Reduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    times.push_back(worst);
  }

  // Check a few places of the result on every rank; rank 0 reports whether all agree.
  const float root_sum = static_cast<float>(n) * static_cast<float>(n + 1) / 2;
  int ok = 1;
  auto expect = [&](long long i, float v) {
    if (recv.get()[i] != v) ok = 0;
  };
  for (long long i : {0LL, recv_count / 2, recv_count - 1}) {
    if (a.op == "all_to_all_v") break;  // below, per peer
    if (a.op == "all_reduce" || a.op == "reduce_scatter") expect(i, root_sum);
    else if (a.op == "broadcast") expect(i, me == 0 ? -1.0f : 1.0f);  // root keeps its send buffer
    else expect(i, static_cast<float>(i / piece + 1));                // all_gather, all_to_all
  }
  for (int p = 0; a.op == "all_to_all_v" && p < n; ++p)
    if (counts[static_cast<size_t>(p)] > 0) {
      expect(displs[static_cast<size_t>(p)], static_cast<float>(p + 1));
      expect(displs[static_cast<size_t>(p)] + counts[static_cast<size_t>(p)] - 1, static_cast<float>(p + 1));
    }
  int all_ok = 0;
  MPI_Reduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
  if (me != 0) return "";
  return strf(
      "{\"op\": \"%s\", \"ranks\": %d, \"bytes\": %lld, \"median_s\": %.9g, \"min_s\": %.9g, \"max_s\": %.9g, "
      "\"reps\": %d, \"iters\": %d, \"ok\": %s}",
      a.op.c_str(), n, elems * 4, median(times), *std::min_element(times.begin(), times.end()),
      *std::max_element(times.begin(), times.end()), reps, iters, all_ok ? "true" : "false");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  Args a = parse(argc, argv);
  if (me == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::string v(version, static_cast<size_t>(std::max(0, len)));
    v = v.substr(0, v.find_first_of(",\n"));  // "Open MPI v4.1.4" without the build details
    std::printf("{\"library\": \"%s\"}\n", v.c_str());
    std::fflush(stdout);
  }
  for (long long bytes : a.sizes) {
    std::string line = measure(a, bytes, me, n);
    if (me == 0) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    }
  }
  MPI_Finalize();
  return 0;
}
