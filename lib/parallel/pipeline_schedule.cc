// The schedule generators, their formulas and stage balancing (the simulator and the
// timelines are in pipeline_sim.cc). Each generator only orders the compute actions of a
// rank; one helper (pipe_with_comm) then adds the sends and receives, so every schedule
// moves its stream by the same rule and the simulator checks one protocol.
#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>

#include "core/error.h"

namespace dt::parallel {

const char* pipe_op_name(PipeOp op) {
  switch (op) {
    case PipeOp::Forward: return "F";
    case PipeOp::Backward: return "B";
    case PipeOp::BackwardInput: return "Bi";
    case PipeOp::BackwardWeight: return "W";
    case PipeOp::SendActivation: return "sendA";
    case PipeOp::RecvActivation: return "recvA";
    case PipeOp::SendGrad: return "sendG";
    case PipeOp::RecvGrad: return "recvG";
  }
  return "?";
}

bool is_compute(PipeOp op) {
  return op == PipeOp::Forward || op == PipeOp::Backward || op == PipeOp::BackwardInput || op == PipeOp::BackwardWeight;
}

std::string PipeAction::str() const {
  std::string s = pipe_op_name(op) + std::to_string(micro);
  if (chunk != 0) s += "c" + std::to_string(chunk);
  return s;
}

bool PipeSchedule::split_backward() const {
  for (const auto& rank : actions)
    for (const PipeAction& a : rank)
      if (a.op == PipeOp::BackwardInput || a.op == PipeOp::BackwardWeight) return true;
  return false;
}

const std::vector<std::string>& pipe_schedule_names() {
  static const std::vector<std::string> names = {"gpipe", "1f1b", "interleaved", "zb-h1", "forward"};
  return names;
}

namespace {

// Every argument check of make_pipe_schedule, shared with the formulas so that a formula
// is never asked about a schedule that cannot be made.
void pipe_check_args(const std::string& name, int P, int M, int v) {
  const auto& names = pipe_schedule_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string accepted;
    for (const auto& n : names) accepted += (accepted.empty() ? "" : ", ") + n;
    invalid("pp schedule \"" + name + "\": accepted: " + accepted);
  }
  DT_CHECK(P >= 1, "stages = " + std::to_string(P) + "; accepted: >= 1");
  DT_CHECK(M >= 1, "micro_batches = " + std::to_string(M) + "; accepted: >= 1");
  DT_CHECK(v >= 1, "virtual_stages = " + std::to_string(v) + "; accepted: >= 1");
  // Bounds the lists (and keeps every index product in int) whatever a caller passes.
  DT_CHECK(static_cast<long long>(P) * M * v <= (1LL << 26),
           "stages x micro_batches x virtual_stages = " + std::to_string(static_cast<long long>(P) * M * v) +
               "; accepted: at most 2^26 (micro-batch, chunk) passes over all ranks");
  if (name == "interleaved") {
    DT_CHECK(v >= 2, "virtual_stages = " + std::to_string(v) + " for \"interleaved\"; accepted: >= 2");
    DT_CHECK(M % P == 0, "micro_batches = " + std::to_string(M) + " is not divisible by stages = " + std::to_string(P) +
                             "; accepted for \"interleaved\": a multiple of " + std::to_string(P));
  } else {
    DT_CHECK(v == 1, "virtual_stages = " + std::to_string(v) + " for \"" + name +
                         "\"; accepted: 1 (only \"interleaved\" runs several chunks per rank)");
  }
}

PipeAction pipe_act(PipeOp op, int m, int c = 0) {
  PipeAction a;
  a.op = op, a.micro = m, a.chunk = c;
  return a;
}

// Rank r's compute order with the stream's messages around it: a receive just before the
// compute that needs it, a send just after the compute that makes it (sends are eager, so
// sending early never delays the sender).
std::vector<PipeAction> pipe_with_comm(const PipeSchedule& s, int r, const std::vector<PipeAction>& compute) {
  const int last = s.num_virtual_stages() - 1;
  std::vector<PipeAction> out;
  out.reserve(compute.size() * 3);
  for (const PipeAction& a : compute) {
    const int vs = s.virtual_stage(r, a.chunk);
    const bool backward = a.op == PipeOp::Backward || a.op == PipeOp::BackwardInput;
    if (a.op == PipeOp::Forward && vs > 0) out.push_back(pipe_act(PipeOp::RecvActivation, a.micro, a.chunk));
    if (backward && vs < last) out.push_back(pipe_act(PipeOp::RecvGrad, a.micro, a.chunk));
    out.push_back(a);
    if (a.op == PipeOp::Forward && vs < last) out.push_back(pipe_act(PipeOp::SendActivation, a.micro, a.chunk));
    if (backward && vs > 0) out.push_back(pipe_act(PipeOp::SendGrad, a.micro, a.chunk));
  }
  return out;
}

// 1F1B on rank r of P (also GPipe when warm-up = M): `warmup` forwards, then one forward
// and one backward at a time, then the backwards left.
std::vector<PipeAction> pipe_one_f_one_b(int M, int warmup) {
  std::vector<PipeAction> out;
  for (int m = 0; m < warmup; ++m) out.push_back(pipe_act(PipeOp::Forward, m));
  for (int i = 0; i < M - warmup; ++i) {
    out.push_back(pipe_act(PipeOp::Forward, warmup + i));
    out.push_back(pipe_act(PipeOp::Backward, i));
  }
  for (int m = std::max(M - warmup, 0); m < M; ++m) out.push_back(pipe_act(PipeOp::Backward, m));
  return out;
}

// Megatron's interleaved 1F1B. The v M (micro-batch, chunk) forwards run in groups of P
// micro-batches per chunk: the k-th forward is chunk (k mod vP) / P of micro-batch
// (k / vP) P + k mod P, and the k-th backward the same with the chunks reversed (the last
// virtual stage's gradient comes back first). Rank r runs 2 (P - r - 1) + (v - 1) P
// forwards before its first backward: enough for the stream to come around to the last
// virtual stage and back, so a steady forward-backward pair never waits on a full lap.
std::vector<PipeAction> pipe_interleaved(int P, int M, int v, int r) {
  const int total = M * v;
  auto micro = [&](int k) { return (k / (P * v)) * P + k % P; };
  auto chunk = [&](int k, bool forward) {
    const int c = (k % (P * v)) / P;
    return forward ? c : v - 1 - c;
  };
  const int warmup = std::min(2 * (P - r - 1) + (v - 1) * P, total);
  std::vector<PipeAction> out;
  for (int k = 0; k < warmup; ++k) out.push_back(pipe_act(PipeOp::Forward, micro(k), chunk(k, true)));
  for (int i = 0; i < total - warmup; ++i) {
    const int k = warmup + i;
    out.push_back(pipe_act(PipeOp::Forward, micro(k), chunk(k, true)));
    out.push_back(pipe_act(PipeOp::Backward, micro(i), chunk(i, false)));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(pipe_act(PipeOp::Backward, micro(k), chunk(k, false)));
  return out;
}

// ZB-H1 (Qi et al. 2023) on rank r of P: 1F1B's order with each backward split into its
// input part Bi (which the previous stage waits for) and its weight part W (which nobody
// waits for). Rank r keeps up to r weight passes pending: rank 0 runs W right after Bi,
// the last rank lags P - 1 behind. In the cool-down the input gradients then reach rank r
// every 3 units while its own Bi takes 1, and the pending W's fill the gap, so every rank
// idles P - 1 units in all: (P - 1) / (3 M + P - 1) of the step with F = Bi = W = 1.
// With M < P the chain of forwards then input gradients through all stages is longer
// than the work: the step takes 2 M + 2 P - 1 (see bubble_formula).
// Live activations (a forward whose W has not run) peak at min(M, P) on every rank,
// 1F1B's peak on rank 0.
std::vector<PipeAction> pipe_zb_h1(int P, int M, int r) {
  const int warmup = std::min(P - r - 1, M);
  const size_t lag = static_cast<size_t>(r);
  std::vector<PipeAction> out;
  std::deque<int> pending;  // micro-batches whose Bi ran and W has not
  auto backward = [&](int m) {
    out.push_back(pipe_act(PipeOp::BackwardInput, m));
    pending.push_back(m);
    if (pending.size() > lag) {
      out.push_back(pipe_act(PipeOp::BackwardWeight, pending.front()));
      pending.pop_front();
    }
  };
  for (int m = 0; m < warmup; ++m) out.push_back(pipe_act(PipeOp::Forward, m));
  for (int i = 0; i < M - warmup; ++i) {
    out.push_back(pipe_act(PipeOp::Forward, warmup + i));
    backward(i);
  }
  for (int m = M - warmup; m < M; ++m) backward(m);
  for (int m : pending) out.push_back(pipe_act(PipeOp::BackwardWeight, m));
  return out;
}

}  // namespace

PipeSchedule make_pipe_schedule(const std::string& name, int stages, int micro_batches, int virtual_stages) {
  pipe_check_args(name, stages, micro_batches, virtual_stages);
  PipeSchedule s;
  s.name = name, s.stages = stages, s.micro_batches = micro_batches, s.virtual_stages = virtual_stages;
  const int P = stages, M = micro_batches;
  for (int r = 0; r < P; ++r) {
    std::vector<PipeAction> compute;
    if (name == "gpipe") {
      compute = pipe_one_f_one_b(M, M);
    } else if (name == "1f1b") {
      compute = pipe_one_f_one_b(M, std::min(P - r - 1, M));
    } else if (name == "interleaved") {
      compute = pipe_interleaved(P, M, virtual_stages, r);
    } else if (name == "zb-h1") {
      compute = pipe_zb_h1(P, M, r);
    } else {  // forward
      for (int m = 0; m < M; ++m) compute.push_back(pipe_act(PipeOp::Forward, m));
    }
    s.actions.push_back(pipe_with_comm(s, r, compute));
  }
  return s;
}

namespace {
// Each schedule's bubble by formula: its text and the idle and step time units it counts.
struct Bubble {
  const char* text;
  long long idle, step;
};
Bubble bubble_of(const std::string& name, long long P, long long M, long long v) {
  if (name == "interleaved") return {"(P-1)/(vM+P-1)", P - 1, v * M + P - 1};
  // ZB-H1: 3 M units of work per rank over a step of 3 M + P - 1, or, with M < P, of
  // 2 M + 2 P - 1: the forward of the last micro-batch down the P stages, its input
  // gradient back up, and rank 0's last W.
  if (name == "zb-h1" && M >= P) return {"(P-1)/(3M+P-1)", P - 1, 3 * M + P - 1};
  if (name == "zb-h1") return {"(2P-M-1)/(2M+2P-1)", 2 * P - M - 1, 2 * M + 2 * P - 1};
  return {"(P-1)/(M+P-1)", P - 1, M + P - 1};  // gpipe, 1f1b, forward
}
}  // namespace

double bubble_formula(const std::string& name, int stages, int micro_batches, int virtual_stages) {
  pipe_check_args(name, stages, micro_batches, virtual_stages);
  const Bubble b = bubble_of(name, stages, micro_batches, virtual_stages);
  return static_cast<double>(b.idle) / static_cast<double>(b.step);
}

std::string bubble_formula_text(const std::string& name, int stages, int micro_batches, int virtual_stages) {
  pipe_check_args(name, stages, micro_batches, virtual_stages);
  const Bubble b = bubble_of(name, stages, micro_batches, virtual_stages);
  return std::string(b.text) + " = " + std::to_string(b.idle) + "/" + std::to_string(b.step);
}

int activation_peak_formula(const std::string& name, int stages, int micro_batches, int virtual_stages) {
  pipe_check_args(name, stages, micro_batches, virtual_stages);
  const int P = stages, M = micro_batches, v = virtual_stages;
  if (name == "gpipe") return M;
  if (name == "forward") return 1;
  if (name == "interleaved") return std::min(v * M, (v - 1) * P + 2 * (P - 1) + 1);
  return std::min(M, P);  // 1f1b, zb-h1
}

// --- placing blocks into stages

namespace {

std::string pipe_counts_str(const std::vector<int>& counts) {
  std::string s;
  for (int c : counts) s += (s.empty() ? "" : ",") + std::to_string(c);
  return s;
}

}  // namespace

std::vector<int> balance_stages(int n_blocks, int parts, double block_cost, double first_extra, double last_extra) {
  DT_CHECK(n_blocks >= 1 && n_blocks <= 1024, "n_blocks = " + std::to_string(n_blocks) + "; accepted: 1 to 1024");
  DT_CHECK(parts >= 1 && parts <= n_blocks,
           "parts = " + std::to_string(parts) + " with n_blocks = " + std::to_string(n_blocks) +
               (parts > n_blocks ? " (more stages than blocks)" : "") + "; accepted: 1 to n_blocks");
  DT_CHECK(std::isfinite(block_cost) && block_cost >= 0, "block_cost must be finite and >= 0");
  DT_CHECK(std::isfinite(first_extra) && first_extra >= 0, "first_extra must be finite and >= 0");
  DT_CHECK(std::isfinite(last_extra) && last_extra >= 0, "last_extra must be finite and >= 0");
  auto cost = [&](int part, int count) {
    return count * block_cost + (part == 0 ? first_extra : 0.0) + (part == parts - 1 ? last_extra : 0.0);
  };
  // Tables over (k, j): parts k.. holding the last j blocks; part k takes c of them and
  // leaves j - c (at least one each) to the parts after it.
  const double inf = std::numeric_limits<double>::infinity();
  const size_t cols = static_cast<size_t>(n_blocks) + 1;
  auto at = [&](std::vector<double>& t, int k, int j) -> double& {
    return t[static_cast<size_t>(k) * cols + static_cast<size_t>(j)];
  };
  auto solve = [&](std::vector<double>& t, auto&& combine) {
    t.assign(static_cast<size_t>(parts + 1) * cols, inf);
    at(t, parts, 0) = 0.0;
    for (int k = parts - 1; k >= 0; --k)
      for (int j = parts - k; j <= n_blocks; ++j)
        for (int c = 1; c <= j - (parts - k - 1); ++c)
          at(t, k, j) = std::min(at(t, k, j), combine(k, c, at(t, k + 1, j - c)));
  };
  // First the least possible costliest part (the step's pace is the slowest stage's) ...
  std::vector<double> worst, spread;
  solve(worst, [&](int k, int c, double rest) { return std::max(cost(k, c), rest); });
  const double target = at(worst, 0, n_blocks), tol = 1e-9 * std::max(1.0, target);
  // ... then, among the splits that reach it, the most even one (least sum of squared part
  // costs), so no stage is left nearly empty when another part sets the pace.
  solve(spread,
        [&](int k, int c, double rest) { return cost(k, c) <= target + tol ? cost(k, c) * cost(k, c) + rest : inf; });
  // Ties left: each part in turn takes the fewest blocks, so extra blocks go to later
  // stages, which hold fewer micro-batches' activations under 1F1B (rank r keeps P - r).
  std::vector<int> bounds = {0};
  int left = n_blocks;
  for (int k = 0; k < parts; ++k) {
    const double want = at(spread, k, left);
    int take = left - (parts - k - 1);
    for (int c = 1; c < take; ++c) {
      const double sq = cost(k, c) <= target + tol ? cost(k, c) * cost(k, c) + at(spread, k + 1, left - c) : inf;
      if (sq <= want + 1e-9 * std::max(1.0, want)) {
        take = c;
        break;
      }
    }
    left -= take;
    bounds.push_back(bounds.back() + take);
  }
  DT_ASSERT(bounds.back() == n_blocks);
  return bounds;
}

std::vector<int> stages_from_counts(const std::vector<int>& counts, int n_blocks, int parts) {
  const std::string what = "stage block counts \"" + pipe_counts_str(counts) + "\"";
  DT_CHECK(parts >= 1, "parts = " + std::to_string(parts) + "; accepted: >= 1");
  DT_CHECK(static_cast<int>(counts.size()) == parts, what + " name " + std::to_string(counts.size()) +
                                                         " parts; accepted: one count per part, " +
                                                         std::to_string(parts) + " in all");
  std::vector<int> bounds = {0};
  long long sum = 0;  // wide: hostile counts must not wrap around to n_blocks
  for (size_t k = 0; k < counts.size(); ++k) {
    DT_CHECK(counts[k] >= 1, what + ": part " + std::to_string(k) + " has " + std::to_string(counts[k]) +
                                 " blocks; accepted: each >= 1");
    sum += counts[k];
    if (sum <= n_blocks) bounds.push_back(static_cast<int>(sum));
  }
  DT_CHECK(sum == n_blocks, what + " sum to " + std::to_string(sum) +
                                "; accepted: counts summing to n_blocks = " + std::to_string(n_blocks));
  return bounds;
}

}  // namespace dt::parallel
