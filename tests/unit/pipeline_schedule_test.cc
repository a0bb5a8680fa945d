// Pipeline schedules on the simulator's clock: each seed claim (forward-only M + P - 1,
// the bubbles of GPipe, 1F1B, interleaved and ZB-H1, the activation peaks) against the
// simulation over a grid; broken schedules named; bad arguments; stage balancing; timelines.
#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <string>
#include <vector>

#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

using parallel::PipeAction;
using parallel::PipeOp;
using parallel::PipeSchedule;

// The virtual-stage counts a schedule accepts in the grid: 1, or 2..4 for interleaved.
std::vector<int> grid_vs(const std::string& name) {
  return name == "interleaved" ? std::vector<int>{2, 3, 4} : std::vector<int>{1};
}
bool valid(const std::string& name, int P, int M) { return name != "interleaved" || M % P == 0; }

TEST(PipeSchedule, ForwardOnlyTakesMPlusPMinusOneTicks) {
  for (int P : {1, 2, 3, 4, 8})
    for (int M = 1; M <= 16; ++M) {
      const auto sim = parallel::simulate(parallel::make_pipe_schedule("forward", P, M));
      EXPECT_DOUBLE_EQ(sim.makespan, M + P - 1) << "P=" << P << " M=" << M;
      for (double b : sim.busy) EXPECT_DOUBLE_EQ(b, M);
    }
  const auto one = parallel::simulate(parallel::make_pipe_schedule("forward", 4, 1));
  EXPECT_DOUBLE_EQ(1.0 - one.bubble_fraction, 0.25);
  const auto four = parallel::simulate(parallel::make_pipe_schedule("forward", 4, 4));
  EXPECT_DOUBLE_EQ(four.makespan, 7.0);
  EXPECT_NEAR(1.0 - four.bubble_fraction, 4.0 / 7.0, 1e-12);
}

TEST(PipeSchedule, GPipeAnd1F1BShareTheBubbleButNotTheMemory) {
  for (int P : {1, 2, 3, 4, 8})
    for (int M = 1; M <= 16; ++M) {
      const double want = (P - 1.0) / (M + P - 1.0);
      const auto g = parallel::simulate(parallel::make_pipe_schedule("gpipe", P, M));
      const auto f = parallel::simulate(parallel::make_pipe_schedule("1f1b", P, M));
      EXPECT_NEAR(g.bubble_fraction, want, 1e-12) << "gpipe P=" << P << " M=" << M;
      EXPECT_NEAR(f.bubble_fraction, want, 1e-12) << "1f1b P=" << P << " M=" << M;
      EXPECT_DOUBLE_EQ(g.makespan, 3.0 * (M + P - 1));  // F = 1, B = 2
      EXPECT_DOUBLE_EQ(f.makespan, 3.0 * (M + P - 1));
      EXPECT_EQ(g.activation_peak[0], M);
      EXPECT_EQ(f.activation_peak[0], std::min(M, P));
      for (int r = 0; r < P; ++r)
        EXPECT_EQ(f.activation_peak[static_cast<size_t>(r)], std::min(M, P - r)) << "rank " << r;
    }
}

TEST(PipeSchedule, InterleavingDividesTheBubbleTimeByV) {
  for (int P : {2, 3, 4, 8})
    for (int v : {2, 3, 4})
      for (int M = P; M <= 16; M += P) {
        const auto plain = parallel::simulate(parallel::make_pipe_schedule("1f1b", P, M));
        const auto inter = parallel::simulate(parallel::make_pipe_schedule("interleaved", P, M, v));
        EXPECT_NEAR(inter.bubble_fraction, (P - 1.0) / (v * M + P - 1.0), 1e-12)
            << "P=" << P << " M=" << M << " v=" << v;
        // Each rank computes 3 M units either way; the idle time shrinks v-fold.
        EXPECT_NEAR(inter.makespan - 3.0 * M, (plain.makespan - 3.0 * M) / v, 1e-9);
      }
}

TEST(PipeSchedule, ZeroBubbleH1CutsTheBubbleToAThirdAtOneF1BsPeak) {
  for (int P : {2, 3, 4, 8})
    for (int M = 1; M <= 16; ++M) {
      const auto s = parallel::make_pipe_schedule("zb-h1", P, M);
      EXPECT_TRUE(s.split_backward());
      const auto sim = parallel::simulate(s);
      const auto plain = parallel::simulate(parallel::make_pipe_schedule("1f1b", P, M));
      const std::string at = "P=" + std::to_string(P) + " M=" + std::to_string(M);
      if (M >= P) {
        EXPECT_NEAR(sim.bubble_fraction, (P - 1.0) / (3.0 * M + P - 1.0), 1e-12) << at;
        EXPECT_NEAR(sim.makespan - 3.0 * M, (plain.makespan - 3.0 * M) / 3.0, 1e-9) << at;  // a third of the idle
      } else {  // the last forward down and input gradient back up is the critical path
        EXPECT_DOUBLE_EQ(sim.makespan, 2.0 * M + 2.0 * P - 1.0) << at;
        EXPECT_NEAR(sim.bubble_fraction, (2.0 * P - M - 1.0) / (2.0 * M + 2.0 * P - 1.0), 1e-12) << at;
      }
      for (int peak : sim.activation_peak) EXPECT_EQ(peak, std::min(M, P)) << at;
      EXPECT_EQ(sim.activation_peak[0], plain.activation_peak[0]) << at;
    }
}

TEST(PipeSchedule, FormulasMatchTheSimulationOverTheGrid) {
  for (const std::string& name : parallel::pipe_schedule_names())
    for (int v : grid_vs(name))
      for (int P : {2, 3, 4, 8})
        for (int M = 1; M <= 16; ++M) {
          if (!valid(name, P, M)) continue;
          const std::string at =
              name + " P=" + std::to_string(P) + " M=" + std::to_string(M) + " v=" + std::to_string(v);
          PipeSchedule s = parallel::make_pipe_schedule(name, P, M, v);
          parallel::PipeSimulation sim;
          ASSERT_NO_THROW(sim = parallel::simulate(s)) << at;
          EXPECT_NEAR(sim.bubble_fraction, parallel::bubble_formula(name, P, M, v), 1e-12) << at;
          EXPECT_EQ(sim.activation_peak[0], parallel::activation_peak_formula(name, P, M, v)) << at;
          // Every compute action once per (micro-batch, chunk): F, then B or Bi + W.
          const int per_pair = name == "forward" ? 1 : name == "zb-h1" ? 3 : 2;
          size_t compute = 0;
          for (const auto& rank : s.actions)
            compute += static_cast<size_t>(std::count_if(
                rank.begin(), rank.end(), [](const PipeAction& a) { return parallel::is_compute(a.op); }));
          EXPECT_EQ(compute, static_cast<size_t>(P) * M * v * per_pair) << at;
          EXPECT_GE(sim.spans.size(), compute) << at;
        }
}

TEST(PipeSchedule, StreamActionsFollowTheOneRule) {
  const PipeSchedule s = parallel::make_pipe_schedule("1f1b", 2, 2);
  auto str = [](const std::vector<PipeAction>& list) {
    std::string out;
    for (const PipeAction& a : list) out += (out.empty() ? "" : " ") + a.str();
    return out;
  };
  EXPECT_EQ(str(s.actions[0]), "F0 sendA0 F1 sendA1 recvG0 B0 recvG1 B1");
  EXPECT_EQ(str(s.actions[1]), "recvA0 F0 B0 sendG0 recvA1 F1 B1 sendG1");
  const PipeSchedule z = parallel::make_pipe_schedule("zb-h1", 2, 2);
  EXPECT_EQ(str(z.actions[0]), "F0 sendA0 F1 sendA1 recvG0 Bi0 W0 recvG1 Bi1 W1");
  EXPECT_EQ(str(z.actions[1]), "recvA0 F0 Bi0 sendG0 recvA1 F1 Bi1 sendG1 W0 W1");
  const PipeSchedule i = parallel::make_pipe_schedule("interleaved", 2, 2, 2);
  EXPECT_EQ(str(i.actions[1]),
            "recvA0 F0 sendA0 recvA1 F1 sendA1 recvA0c1 F0c1 B0c1 sendG0c1 recvA1c1 F1c1 B1c1 "
            "sendG1c1 recvG0 B0 sendG0 recvG1 B1 sendG1");
  EXPECT_EQ(i.virtual_stage(1, 1), 3);
}

// A broken schedule is refused with INVALID_ARGUMENT naming the fault.
void expect_fault(const PipeSchedule& s, const std::string& needle) {
  test::expect_invalid([&] { parallel::simulate(s); }, needle);
}

TEST(PipeSchedule, BrokenSchedulesAreNamed) {
  const PipeSchedule good = parallel::make_pipe_schedule("1f1b", 2, 2);
  // rank 0: F0 sendA0 F1 sendA1 recvG0 B0 recvG1 B1; rank 1: recvA0 F0 B0 sendG0 recvA1 F1 B1 sendG1
  {  // rank 0 waits for G0 before sending A0: each rank waits for the other
    PipeSchedule s = good;
    std::swap(s.actions[0][1], s.actions[0][4]);
    expect_fault(s, "deadlock");
    expect_fault(s, "rank 0 action 1 (recvG0) waits for rank 1");
    expect_fault(s, "rank 1 action 0 (recvA0) waits for rank 0");
  }
  {  // a dropped send
    PipeSchedule s = good;
    s.actions[0].erase(s.actions[0].begin() + 3);  // sendA1
    expect_fault(s, "rank 1 action 4 (recvA1) has no matching send: rank 0 has no sendA1 left to run");
  }
  {  // a dropped receive: the forward runs without its input
    PipeSchedule s = good;
    s.actions[1].erase(s.actions[1].begin() + 4);  // recvA1
    expect_fault(s, "rank 1 action 4 (F1): runs before its input arrived");
  }
  {  // rank 1 takes micro-batch 1 first: the stream of tag 18 is in the other order
    PipeSchedule s = parallel::make_pipe_schedule("gpipe", 2, 2);
    auto& r1 = s.actions[1];  // recvA0 F0 recvA1 F1 B0 sendG0 B1 sendG1
    std::swap(r1[0], r1[2]);
    std::swap(r1[1], r1[3]);
    expect_fault(s, "rank 1 action 0 (recvA1): the next message from rank 0 with tag 18 is micro-batch 0's");
  }
  {  // a send nobody receives
    PipeSchedule s = parallel::make_pipe_schedule("forward", 2, 1);
    s.actions[0].push_back(s.actions[0][1]);  // sendA0 twice
    expect_fault(s, "rank 0 action 2 (sendA0) is never received by rank 1");
  }
  {  // compute actions missing, repeated, or before their inputs
    PipeSchedule s = good;
    s.actions[0].push_back({PipeOp::Forward, 1, 0});
    expect_fault(s, "rank 0: F1 appears 2 times");
    s = good;
    s.actions[1].erase(s.actions[1].begin() + 6);  // B1
    expect_fault(s, "rank 1: B1 is missing");
    s = parallel::make_pipe_schedule("1f1b", 1, 1);  // F0 B0
    std::swap(s.actions[0][0], s.actions[0][1]);
    expect_fault(s, "rank 0 action 0 (B0): runs before the forward");
    s = parallel::make_pipe_schedule("zb-h1", 1, 1);  // F0 Bi0 W0
    std::swap(s.actions[0][1], s.actions[0][2]);
    expect_fault(s, "rank 0 action 1 (W0): runs before the input-gradient backward");
    s = good;
    s.actions[0][5].op = PipeOp::BackwardInput;
    expect_fault(s, "mixes whole backwards");
  }
  {  // indices and peers out of range
    PipeSchedule s = good;
    s.actions[0][0].micro = 2;
    expect_fault(s, "micro-batch out of range; accepted: 0 to 1");
    s = good;
    s.actions[0].insert(s.actions[0].begin(), PipeAction{PipeOp::RecvActivation, 0, 0});
    expect_fault(s, "virtual stage 0 has no previous stage");
    s = good;
    s.actions.pop_back();
    expect_fault(s, "lists 1 ranks; accepted: stages = 2");
  }
  parallel::PipeCosts bad;
  bad.send = -1;
  test::expect_invalid([&] { parallel::simulate(good, bad); }, "costs");
}

TEST(PipeSchedule, BadArgumentsAreNamed) {
  using parallel::make_pipe_schedule;
  test::expect_invalid([] { make_pipe_schedule("foo", 4, 8); },
                       "pp schedule \"foo\": accepted: gpipe, 1f1b, interleaved, zb-h1, forward");
  test::expect_invalid(
      [] { make_pipe_schedule("interleaved", 4, 6, 2); },
      "micro_batches = 6 is not divisible by stages = 4; accepted for \"interleaved\": a multiple of 4");
  test::expect_invalid([] { make_pipe_schedule("interleaved", 4, 8, 1); }, "virtual_stages = 1 for \"interleaved\"");
  test::expect_invalid([] { make_pipe_schedule("gpipe", 4, 8, 2); }, "virtual_stages = 2 for \"gpipe\"; accepted: 1");
  test::expect_invalid([] { make_pipe_schedule("1f1b", 0, 8); }, "stages = 0; accepted: >= 1");
  test::expect_invalid([] { make_pipe_schedule("1f1b", 4, 0); }, "micro_batches = 0; accepted: >= 1");
  test::expect_invalid([] { make_pipe_schedule("interleaved", 1024, 1 << 20, 2); }, "accepted: at most 2^26");
  test::expect_invalid([] { parallel::bubble_formula("zb-h2", 4, 8); }, "pp schedule \"zb-h2\"");
  test::expect_invalid([] { parallel::activation_peak_formula("interleaved", 4, 6, 2); }, "not divisible");
}

TEST(PipeSchedule, BalanceStagesIsExactAndDocumentedOnTies) {
  using parallel::balance_stages;
  EXPECT_EQ(balance_stages(5, 2), (std::vector<int>{0, 2, 5}));  // ties: the extra block goes later
  EXPECT_EQ(balance_stages(8, 4), (std::vector<int>{0, 2, 4, 6, 8}));
  EXPECT_EQ(balance_stages(10, 3), (std::vector<int>{0, 3, 6, 10}));
  EXPECT_EQ(balance_stages(3, 3), (std::vector<int>{0, 1, 2, 3}));
  // The embedding's and the head's costs push blocks off the first and last parts.
  EXPECT_EQ(balance_stages(8, 4, 1.0, 2.0, 0.0), (std::vector<int>{0, 1, 3, 5, 8}));
  EXPECT_EQ(balance_stages(8, 4, 1.0, 0.0, 2.0), (std::vector<int>{0, 2, 4, 7, 8}));
  EXPECT_EQ(balance_stages(8, 4, 1.0, 2.0, 2.0), (std::vector<int>{0, 1, 4, 7, 8}));
  // Exact: brute force over every split of 12 blocks into 4 with awkward extras.
  const double first = 1.7, last = 2.3;
  auto worst = [&](const std::vector<int>& b) {
    double w = 0;
    for (size_t k = 0; k + 1 < b.size(); ++k)
      w = std::max(w, (b[k + 1] - b[k]) + (k == 0 ? first : 0.0) + (k + 2 == b.size() ? last : 0.0));
    return w;
  };
  double best = 1e9;
  for (int a = 1; a < 12; ++a)
    for (int b = a + 1; b < 12; ++b)
      for (int c = b + 1; c < 12; ++c) best = std::min(best, worst({0, a, b, c, 12}));
  EXPECT_DOUBLE_EQ(worst(balance_stages(12, 4, 1.0, first, last)), best);
  test::expect_invalid([] { balance_stages(3, 4); }, "more stages than blocks");
  test::expect_invalid([] { balance_stages(3, 0); }, "parts = 0");
  test::expect_invalid([] { balance_stages(4, 2, -1.0); }, "block_cost");

  using parallel::stages_from_counts;
  EXPECT_EQ(stages_from_counts({3, 1}, 4, 2), (std::vector<int>{0, 3, 4}));
  test::expect_invalid(
      [] {
        stages_from_counts({3, 1}, 5, 2);
      },
      "\"3,1\" sum to 4; accepted: counts summing to n_blocks = 5");
  test::expect_invalid([] { stages_from_counts({3, 0, 1}, 4, 3); }, "part 1 has 0 blocks; accepted: each >= 1");
  test::expect_invalid([] { stages_from_counts({4}, 4, 2); }, "one count per part, 2 in all");
  test::expect_invalid([] { stages_from_counts({2147483647, 2147483647, 2}, 0, 3); }, "sum to");
}

TEST(PipeSchedule, TimelinesShowEveryRankAndComputeAction) {
  const PipeSchedule s = parallel::make_pipe_schedule("interleaved", 4, 8, 2);
  const auto sim = parallel::simulate(s);
  const std::string text = parallel::timeline_ascii(s, sim);
  for (int r = 0; r < 4; ++r) EXPECT_NE(text.find("rank " + std::to_string(r) + " |"), std::string::npos) << text;
  EXPECT_NE(text.find("legend:"), std::string::npos);
  const std::string plain = parallel::timeline_ascii(
      parallel::make_pipe_schedule("1f1b", 2, 2), parallel::simulate(parallel::make_pipe_schedule("1f1b", 2, 2)), 36);
  // 1 unit = 4 columns: F0 F1 on rank 0, then idle until B0 comes back.
  EXPECT_EQ(plain.substr(0, plain.find('\n')), "rank 0 |00001111........00000000....11111111|");
  test::expect_invalid([&] { parallel::timeline_ascii(s, sim, 2); }, "timeline width = 2");

  const nlohmann::json trace = parallel::timeline_chrome_trace(s, sim);
  size_t compute = 0, threads = 0, x = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") ++threads;
    if (e["ph"] != "X") continue;
    ++x;
    EXPECT_EQ(e["pid"], 0);
    if (e["cat"] == "compute") ++compute;
  }
  EXPECT_EQ(threads, 4u);
  EXPECT_EQ(compute, static_cast<size_t>(4 * 8 * 2 * 2));  // F and B per (micro-batch, chunk) per rank
  EXPECT_EQ(x, sim.spans.size());
  const auto& first = trace["traceEvents"][4];  // after the 4 thread names: rank 0's F0, 0 to 0.5 units
  EXPECT_EQ(first["name"], "F0");
  EXPECT_EQ(first["tid"], 0);
  EXPECT_DOUBLE_EQ(first["ts"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(first["dur"].get<double>(), 500.0);
  EXPECT_EQ(trace["traceEvents"][0]["args"]["name"], "pp rank 0");
}

}  // namespace
}  // namespace dt
