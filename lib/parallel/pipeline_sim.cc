// The pipeline simulator and its timelines (the generators are in pipeline_schedule.cc).
// The simulator is also the schedules' proof: it runs the same action lists the executor
// runs, with the executor's rules (eager sends, receives matched per sender and tag in
// order), so a schedule that passes here cannot deadlock or mix up micro-batches there.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <deque>
#include <map>
#include <tuple>

#include "core/error.h"
#include "parallel/pipeline_schedule.h"

namespace dt::parallel {
namespace {

// The other end of a stream action on rank r: its rank and chunk, and the message's tag.
struct PipeEnd {
  int rank = 0, chunk = 0, tag = 0;
};
PipeEnd pipe_other_end(const PipeSchedule& s, int r, const PipeAction& a) {
  const int vs = s.virtual_stage(r, a.chunk);
  int other = vs, tag = 0;
  switch (a.op) {
    case PipeOp::SendActivation: other = vs + 1, tag = message_tag(false, vs + 1); break;
    case PipeOp::RecvActivation: other = vs - 1, tag = message_tag(false, vs); break;
    case PipeOp::SendGrad: other = vs - 1, tag = message_tag(true, vs - 1); break;
    case PipeOp::RecvGrad: other = vs + 1, tag = message_tag(true, vs); break;
    default: break;
  }
  return {other % s.stages, other / s.stages, tag};
}

// The send that a receive waits for, as the sender lists it.
PipeAction pipe_matching_send(const PipeSchedule& s, int r, const PipeAction& recv) {
  const PipeEnd from = pipe_other_end(s, r, recv);
  PipeAction send;
  send.op = recv.op == PipeOp::RecvActivation ? PipeOp::SendActivation : PipeOp::SendGrad;
  send.micro = recv.micro, send.chunk = from.chunk;
  return send;
}

std::string pipe_where(int r, size_t k, const PipeAction& a) {
  return "rank " + std::to_string(r) + " action " + std::to_string(k) + " (" + a.str() + ")";
}

// What can be checked without running: the shape, each action's indices and peers, and
// that every compute action appears exactly once (forward-only: forwards alone; whole
// backwards: F and B; split backwards: F, Bi and W).
void pipe_check_static(const PipeSchedule& s) {
  const int P = s.stages, M = s.micro_batches, v = s.virtual_stages, last = s.num_virtual_stages() - 1;
  DT_CHECK(P >= 1 && M >= 1 && v >= 1,
           "pipeline schedule \"" + s.name + "\": stages, micro_batches and virtual_stages must be >= 1");
  DT_CHECK(static_cast<int>(s.actions.size()) == P, "pipeline schedule \"" + s.name + "\" lists " +
                                                        std::to_string(s.actions.size()) +
                                                        " ranks; accepted: stages = " + std::to_string(P));
  bool whole = false, split = false;
  // count[op][r][m * v + c] for the four compute ops
  std::vector<std::vector<std::vector<int>>> count(
      4, std::vector<std::vector<int>>(static_cast<size_t>(P), std::vector<int>(static_cast<size_t>(M) * v, 0)));
  for (int r = 0; r < P; ++r)
    for (size_t k = 0; k < s.actions[static_cast<size_t>(r)].size(); ++k) {
      const PipeAction& a = s.actions[static_cast<size_t>(r)][k];
      DT_CHECK(a.micro >= 0 && a.micro < M,
               pipe_where(r, k, a) + ": micro-batch out of range; accepted: 0 to " + std::to_string(M - 1));
      DT_CHECK(a.chunk >= 0 && a.chunk < v,
               pipe_where(r, k, a) + ": chunk out of range; accepted: 0 to " + std::to_string(v - 1));
      const int vs = s.virtual_stage(r, a.chunk);
      const bool to_prev = a.op == PipeOp::RecvActivation || a.op == PipeOp::SendGrad;
      const bool to_next = a.op == PipeOp::SendActivation || a.op == PipeOp::RecvGrad;
      DT_CHECK(!(to_prev && vs == 0), pipe_where(r, k, a) + ": virtual stage 0 has no previous stage");
      DT_CHECK(!(to_next && vs == last), pipe_where(r, k, a) + ": the last virtual stage has no next stage");
      if (is_compute(a.op))
        ++count[static_cast<size_t>(a.op)][static_cast<size_t>(r)][static_cast<size_t>(a.micro * v + a.chunk)];
      whole |= a.op == PipeOp::Backward;
      split |= a.op == PipeOp::BackwardInput || a.op == PipeOp::BackwardWeight;
    }
  DT_CHECK(!(whole && split), "pipeline schedule \"" + s.name +
                                  "\" mixes whole backwards (B) with split ones (Bi, W); accepted: one kind");
  const PipeOp ops[4] = {PipeOp::Forward, PipeOp::Backward, PipeOp::BackwardInput, PipeOp::BackwardWeight};
  for (int r = 0; r < P; ++r)
    for (int m = 0; m < M; ++m)
      for (int c = 0; c < v; ++c)
        for (PipeOp op : ops) {
          const bool wanted = op == PipeOp::Forward || (whole && op == PipeOp::Backward) ||
                              (split && (op == PipeOp::BackwardInput || op == PipeOp::BackwardWeight));
          const int n = count[static_cast<size_t>(op)][static_cast<size_t>(r)][static_cast<size_t>(m * v + c)];
          PipeAction a;
          a.op = op, a.micro = m, a.chunk = c;
          DT_CHECK(n == (wanted ? 1 : 0), "rank " + std::to_string(r) + ": " + a.str() +
                                              (n == 0 ? " is missing" : " appears " + std::to_string(n) + " times") +
                                              "; accepted: once for every micro-batch and chunk");
        }
}

}  // namespace

PipeSimulation simulate(const PipeSchedule& s, const PipeCosts& costs) {
  for (double c : {costs.forward, costs.backward, costs.backward_input, costs.backward_weight, costs.send})
    DT_CHECK(std::isfinite(c) && c >= 0, "pipeline costs must be finite and >= 0");
  pipe_check_static(s);
  const int P = s.stages, v = s.virtual_stages, last = s.num_virtual_stages() - 1;
  const size_t pairs = static_cast<size_t>(s.micro_batches) * static_cast<size_t>(v);
  const bool forward_only = [&] {
    for (const auto& rank : s.actions)
      for (const PipeAction& a : rank)
        if (is_compute(a.op) && a.op != PipeOp::Forward) return false;
    return true;
  }();
  // A chunk holds 1/v of a stage's blocks, so it costs 1/v of a stage's compute.
  auto cost_of = [&](PipeOp op) {
    switch (op) {
      case PipeOp::Forward: return costs.forward / v;
      case PipeOp::Backward: return costs.backward / v;
      case PipeOp::BackwardInput: return costs.backward_input / v;
      case PipeOp::BackwardWeight: return costs.backward_weight / v;
      default: return 0.0;
    }
  };

  struct Msg {
    int micro;
    double arrive;
    int sender;
    size_t action;
  };
  std::map<std::tuple<int, int, int>, std::deque<Msg>> wire;  // (sender, receiver, tag) -> in order
  struct Rank {
    size_t pc = 0;
    double clock = 0.0;
    int live = 0;
    // per (micro, chunk): forward done, (input) backward done, activation and gradient received
    std::vector<char> fwd, bwd, got_act, got_grad;
  };
  std::vector<Rank> ranks(static_cast<size_t>(P));
  for (Rank& rk : ranks) rk.fwd = rk.bwd = rk.got_act = rk.got_grad = std::vector<char>(pairs, 0);
  PipeSimulation sim;
  sim.busy.assign(static_cast<size_t>(P), 0.0);
  sim.activation_peak.assign(static_cast<size_t>(P), 0);

  // Runs rank r's next action; false when it is a receive whose message was not sent yet.
  auto step = [&](int r) {
    Rank& rk = ranks[static_cast<size_t>(r)];
    const PipeAction& a = s.actions[static_cast<size_t>(r)][rk.pc];
    const size_t i = static_cast<size_t>(a.micro * v + a.chunk);
    const int vs = s.virtual_stage(r, a.chunk);
    auto where = [&] { return pipe_where(r, rk.pc, a); };  // built only for a fault
    if (is_compute(a.op)) {
      if (a.op == PipeOp::Forward)
        DT_CHECK(vs == 0 || rk.got_act[i], where() + ": runs before its input arrived (no earlier recvA)");
      else if (a.op == PipeOp::BackwardWeight)
        DT_CHECK(rk.bwd[i], where() + ": runs before the input-gradient backward (Bi) of its micro-batch");
      else {
        DT_CHECK(rk.fwd[i], where() + ": runs before the forward of its micro-batch");
        DT_CHECK(vs == last || rk.got_grad[i],
                 where() + ": runs before its output's gradient arrived (no earlier recvG)");
      }
      const double d = cost_of(a.op);
      sim.spans.push_back({r, a, rk.clock, rk.clock + d});
      rk.clock += d;
      sim.busy[static_cast<size_t>(r)] += d;
      // Live activations: from the forward until the backward that last reads them (W when
      // the backward is split: the weight gradient needs the saved inputs too). A forward
      // with no backward to come frees them when it ends.
      if (a.op == PipeOp::Forward) {
        rk.fwd[i] = 1;
        sim.activation_peak[static_cast<size_t>(r)] = std::max(sim.activation_peak[static_cast<size_t>(r)], ++rk.live);
        if (forward_only) --rk.live;
      } else if (a.op == PipeOp::BackwardWeight) {
        --rk.live;
      } else {
        rk.bwd[i] = 1;
        if (a.op == PipeOp::Backward) --rk.live;
      }
    } else if (a.op == PipeOp::SendActivation || a.op == PipeOp::SendGrad) {
      const bool act = a.op == PipeOp::SendActivation;
      DT_CHECK(act ? rk.fwd[i] : rk.bwd[i],
               where() + ": sends before the " + (act ? "forward" : "backward") + " that makes it ran");
      const PipeEnd to = pipe_other_end(s, r, a);
      wire[{r, to.rank, to.tag}].push_back({a.micro, rk.clock + costs.send, r, rk.pc});
    } else {
      const PipeEnd from = pipe_other_end(s, r, a);
      auto& q = wire[{from.rank, r, from.tag}];
      if (q.empty()) return false;
      DT_CHECK(q.front().micro == a.micro,
               where() + ": the next message from rank " + std::to_string(from.rank) + " with tag " +
                   std::to_string(from.tag) + " is micro-batch " + std::to_string(q.front().micro) +
                   "'s; accepted: sends and receives of one tag in the same micro-batch order");
      if (q.front().arrive > rk.clock) {
        sim.spans.push_back({r, a, rk.clock, q.front().arrive});
        rk.clock = q.front().arrive;
      }
      q.pop_front();
      (a.op == PipeOp::RecvActivation ? rk.got_act : rk.got_grad)[i] = 1;
    }
    ++rk.pc;
    return true;
  };

  // Each rank runs until it blocks; a pass in which no rank moves is the end or a deadlock.
  // Times do not depend on the order the ranks are visited in: a receive completes at
  // max(receiver's clock, message's arrival) whenever it is matched.
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < P; ++r)
      while (ranks[static_cast<size_t>(r)].pc < s.actions[static_cast<size_t>(r)].size() && step(r)) moved = true;
  }
  std::string state, no_send;
  for (int r = 0; r < P; ++r) {
    const Rank& rk = ranks[static_cast<size_t>(r)];
    const auto& list = s.actions[static_cast<size_t>(r)];
    if (!state.empty()) state += "; ";
    if (rk.pc == list.size()) {
      state += "rank " + std::to_string(r) + " finished";
      continue;
    }
    const PipeAction& a = list[rk.pc];
    const PipeEnd from = pipe_other_end(s, r, a);
    state += pipe_where(r, rk.pc, a) + " waits for rank " + std::to_string(from.rank);
    const PipeAction send = pipe_matching_send(s, r, a);
    const auto& src = s.actions[static_cast<size_t>(from.rank)];
    if (no_send.empty() &&
        std::find(src.begin() + static_cast<std::ptrdiff_t>(ranks[static_cast<size_t>(from.rank)].pc), src.end(),
                  send) == src.end())
      no_send = pipe_where(r, rk.pc, a) + " has no matching send: rank " + std::to_string(from.rank) + " has no " +
                send.str() + " left to run";
  }
  for (int r = 0; r < P; ++r)
    if (ranks[static_cast<size_t>(r)].pc < s.actions[static_cast<size_t>(r)].size())
      invalid("pipeline schedule \"" + s.name + "\": " + (no_send.empty() ? "deadlock" : no_send) +
              " (no rank can move: " + state + ")");
  for (const auto& [key, q] : wire)
    if (!q.empty()) {
      const Msg& m = q.front();
      invalid("pipeline schedule \"" + s.name +
              "\": " + pipe_where(m.sender, m.action, s.actions[static_cast<size_t>(m.sender)][m.action]) +
              " is never received by rank " + std::to_string(std::get<1>(key)));
    }
  double total = 0.0;
  for (int r = 0; r < P; ++r) {
    sim.makespan = std::max(sim.makespan, ranks[static_cast<size_t>(r)].clock);
    total += sim.busy[static_cast<size_t>(r)];
  }
  sim.bubble_fraction = sim.makespan > 0 ? 1.0 - total / (P * sim.makespan) : 0.0;
  return sim;
}

// --- timelines

std::string timeline_ascii(const PipeSchedule& s, const PipeSimulation& sim, int width) {
  DT_CHECK(width >= 8 && width <= 4096, "timeline width = " + std::to_string(width) + "; accepted: 8 to 4096");
  const int P = s.stages;
  const double T = sim.makespan;
  // Columns: when every span starts and ends on a multiple of some 1/q of a unit (the unit
  // costs, divided by v), a whole number of columns per 1/q keeps equal actions equally
  // wide; otherwise the makespan is stretched over `width`.
  int cols = width;
  double scale = T > 0 ? width / T : 0.0;  // columns per time unit
  for (int q : {1, 2, 3, 4, 6, 8, 12, 16}) {
    if (T <= 0) break;
    auto on_grid = [&](double t) { return std::abs(t * q - std::round(t * q)) < 1e-6; };
    bool ok = on_grid(T) && T * q <= width;
    for (const PipeSpan& sp : sim.spans) ok = ok && on_grid(sp.start) && on_grid(sp.end);
    if (!ok) continue;
    const int per = static_cast<int>(width / std::lround(T * q));
    cols = static_cast<int>(std::lround(T * q)) * per;
    scale = static_cast<double>(per) * q;
    break;
  }
  const bool chunks = s.virtual_stages > 1;
  std::vector<std::string> micro(static_cast<size_t>(P), std::string(static_cast<size_t>(cols), '.'));
  std::vector<std::string> kind(static_cast<size_t>(P), std::string(static_cast<size_t>(cols), ' '));
  std::vector<std::string> chunk(kind);
  static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  for (const PipeSpan& sp : sim.spans) {
    if (!is_compute(sp.action.op) || sp.rank < 0 || sp.rank >= P) continue;
    const int a = std::min(cols - 1, static_cast<int>(std::lround(sp.start * scale)));
    const int b = std::min(cols, std::max(a + 1, static_cast<int>(std::lround(sp.end * scale))));
    const char k = sp.action.op == PipeOp::Forward         ? 'F'
                   : sp.action.op == PipeOp::Backward      ? 'B'
                   : sp.action.op == PipeOp::BackwardInput ? 'b'
                                                           : 'w';
    for (int c = a; c < b; ++c) {
      const size_t r = static_cast<size_t>(sp.rank), col = static_cast<size_t>(c);
      micro[r][col] = digits[sp.action.micro % 36];
      kind[r][col] = k;
      chunk[r][col] = digits[sp.action.chunk % 36];
    }
  }
  const size_t label = ("rank " + std::to_string(P - 1)).size();
  std::string out;
  for (int r = 0; r < P; ++r) {
    std::string name = "rank " + std::to_string(r);
    name.resize(label, ' ');
    out += name + " |" + micro[static_cast<size_t>(r)] + "|\n";
    out += std::string(label, ' ') + " |" + kind[static_cast<size_t>(r)] + "|\n";
    if (chunks) out += std::string(label, ' ') + " |" + chunk[static_cast<size_t>(r)] + "|\n";
  }
  char unit[32];
  std::snprintf(unit, sizeof unit, "%.3g", scale > 0 ? 1.0 / scale : 0.0);
  char span[32];
  std::snprintf(span, sizeof span, "%.4g", T);
  out += "legend: top row micro-batch (0-9, a-z), under it F forward, B backward, b input-gradient, w weight-gradient";
  out += chunks ? ", then the chunk" : "";
  out += "; . idle; 1 column = " + std::string(unit) + " time units; makespan " + span + ", bubble " +
         std::to_string(static_cast<int>(std::lround(sim.bubble_fraction * 100))) + "%\n";
  return out;
}

nlohmann::json timeline_chrome_trace(const PipeSchedule& s, const PipeSimulation& sim) {
  nlohmann::json events = nlohmann::json::array();
  for (int r = 0; r < s.stages; ++r)
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", r},
                      {"args", {{"name", "pp rank " + std::to_string(r)}}}});
  for (const PipeSpan& sp : sim.spans) {
    const bool compute = is_compute(sp.action.op);
    events.push_back({{"name", compute ? sp.action.str() : "wait " + sp.action.str()},
                      {"cat", compute ? "compute" : "wait"},
                      {"ph", "X"},
                      {"pid", 0},
                      {"tid", sp.rank},
                      {"ts", sp.start * 1000.0},
                      {"dur", (sp.end - sp.start) * 1000.0},
                      {"args", {{"micro", sp.action.micro}, {"chunk", sp.action.chunk}}}});
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

void check_simulation_size(int64_t stages, int64_t micro_batches, int64_t virtual_stages, const char* stages_name,
                           const char* micro_batches_name, const char* virtual_stages_name) {
  int64_t forwards = 0;
  const bool overflow = __builtin_mul_overflow(stages, micro_batches, &forwards) ||
                        __builtin_mul_overflow(forwards, virtual_stages, &forwards);
  DT_CHECK(!overflow && forwards <= kMaxSimulatedForwards,
           std::string(stages_name) + " (" + std::to_string(stages) + ") x " + micro_batches_name + " (" +
               std::to_string(micro_batches) + ") x " + virtual_stages_name + " (" + std::to_string(virtual_stages) +
               ") = " + (overflow ? std::string("more than 2^63") : std::to_string(forwards)) +
               " forwards to simulate; accepted: at most " +
               std::to_string(kMaxSimulatedForwards));
}

}  // namespace dt::parallel
