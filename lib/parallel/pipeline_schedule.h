// Pipeline schedules as data. A schedule is, for each pp rank, the ordered list of actions
// it runs in one training step: forward or backward of micro-batch m on one of its model
// chunks, and the sends and receives that move the stream between stages. A generator
// makes the list (GPipe, 1F1B, interleaved 1F1B, ZB-H1, forward-only); one executor
// (engine/train_engine.cc, through parallel/pipeline_strategy.h) runs any of them, and the
// simulator below runs the same data on a clock: a new schedule is a new generator.
//
// Stages and chunks: the model's blocks are split into stages x virtual_stages contiguous
// ranges ("virtual stages"), numbered in stream order. Rank r holds the v chunks whose
// virtual stages are r, r + P, r + 2P, ...: chunk c of rank r is virtual stage c * P + r
// (Megatron's interleaving). Without interleaving (v = 1) chunk 0 is the rank's stage.
// The embedding runs in virtual stage 0 (rank 0, chunk 0); the head and loss in the last.
//
// Messages: a send of virtual stage s reaches virtual stage s + 1 (activations) or s - 1
// (gradients). Every message carries tag message_tag(kind, receiving virtual stage): between
// one pair of ranks, messages of one tag arrive in the order sent, and every generator sends
// and receives each tag's messages in micro-batch order, so a receive always gets the
// micro-batch it names.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "parallel/stage_tags.h"

namespace dt::parallel {

enum class PipeOp {
  Forward,         // forward of (micro, chunk); the head and loss too in the last virtual stage
  Backward,        // backward of (micro, chunk): input and weight gradients together
  BackwardInput,   // split backward (ZB-H1): the input gradient only (what the previous stage waits for)
  BackwardWeight,  // split backward: the weight gradients, deferred to fill the bubble
  SendActivation,  // the chunk's output stream to the next virtual stage
  RecvActivation,  // the chunk's input stream from the previous virtual stage
  SendGrad,        // the gradient of the chunk's input to the previous virtual stage
  RecvGrad,        // the gradient of the chunk's output from the next virtual stage
};
const char* pipe_op_name(PipeOp op);  // "F", "B", "Bi", "W", "sendA", "recvA", "sendG", "recvG"
bool is_compute(PipeOp op);           // Forward, Backward, BackwardInput, BackwardWeight

struct PipeAction {
  PipeOp op = PipeOp::Forward;
  int micro = 0;  // micro-batch index in [0, micro_batches)
  int chunk = 0;  // the rank's chunk in [0, virtual_stages)
  bool operator==(const PipeAction& o) const { return op == o.op && micro == o.micro && chunk == o.chunk; }
  std::string str() const;  // "F3", "B0c1", "sendA2", ...
};

struct PipeSchedule {
  std::string name;  // as given to make_pipe_schedule
  int stages = 1, micro_batches = 1, virtual_stages = 1;
  std::vector<std::vector<PipeAction>> actions;  // actions[r]: rank r's, in order
  int virtual_stage(int rank, int chunk) const { return chunk * stages + rank; }
  int num_virtual_stages() const { return stages * virtual_stages; }
  bool split_backward() const;  // some action is BackwardInput / BackwardWeight
};

// The generators' names: "gpipe", "1f1b", "interleaved", "zb-h1" (training) and "forward"
// (forward-only: inference, and the seeds' M + P - 1 ticks). On rank r of P:
//  gpipe: every forward, then every backward, each in micro-batch order;
//  1f1b: min(P - r - 1, M) forwards, then one forward and one backward at a time, then
//    the backwards left (Megatron's non-interleaved schedule);
//  interleaved: Megatron's interleaved 1F1B: the v M (micro-batch, chunk) forwards in
//    groups of P micro-batches per chunk (k-th: chunk (k mod vP) / P, micro-batch
//    (k / vP) P + k mod P), the backwards the same with the chunks reversed, and
//    min(2 (P - r - 1) + (v - 1) P, v M) forwards before the first backward;
//  zb-h1: 1f1b with each backward split into Bi then W; rank r lets up to r W's wait (in
//    order), so the last rank's W's fill the cool-down that 1F1B leaves idle;
//  forward: the forwards alone, in micro-batch order.
// Each then gets its stream actions by one rule: recvA before a forward (not virtual stage
// 0), sendA after it (not the last); recvG before a backward or Bi (not the last), sendG
// after it (not virtual stage 0); W moves nothing.
const std::vector<std::string>& pipe_schedule_names();
// One schedule. INVALID_ARGUMENT, naming the argument and what is accepted, for: an unknown
// name; stages or micro_batches < 1; virtual_stages != 1 except for "interleaved", which
// needs virtual_stages >= 2 and micro_batches divisible by stages; stages x micro_batches
// x virtual_stages above 2^26.
PipeSchedule make_pipe_schedule(const std::string& name, int stages, int micro_batches, int virtual_stages = 1);

// The tag of a message (see above): message_tag in parallel/stage_tags.h, the registry.

// The bubble of the schedule by formula, as a fraction of the step (unit costs: a chunk's
// backward twice its forward, split backward halves each one forward): GPipe and 1F1B
// (P - 1) / (M + P - 1); interleaved (P - 1) / (v M + P - 1) (the idle time of 1F1B
// divided by v); ZB-H1 (P - 1) / (3 M + P - 1) for M >= P, and with M < P, where the last
// micro-batch's forward down and input gradient back up the P stages is longer than the
// work, (2 P - M - 1) / (2 M + 2 P - 1) (a step of 2 M + 2 P - 1 units); forward-only
// (P - 1) / (M + P - 1) (forward cost 1: a step of M + P - 1). simulate() with the default
// PipeCosts reproduces each exactly (tests/unit/pipeline_schedule_test.cc, P <= 8, M <= 16).
double bubble_formula(const std::string& name, int stages, int micro_batches, int virtual_stages = 1);
// The same formula as text with its numbers, "(P-1)/(M+P-1) = 3/11", for reports.
std::string bubble_formula_text(const std::string& name, int stages, int micro_batches, int virtual_stages = 1);
// The peak number of micro-batches whose activations are alive on rank 0 by formula (as
// PipeSimulation::activation_peak counts them): GPipe M; 1F1B and ZB-H1 min(M, P);
// forward-only 1 (nothing is kept for a backward); interleaved: as Megatron counts its
// warm-up, min(v M, (v - 1) P + 2 (P - 1) + 1) (micro-batch, chunk) pairs. On rank r,
// 1F1B keeps min(M, P - r); ZB-H1 keeps min(M, P) on every rank (its deferred W's).
int activation_peak_formula(const std::string& name, int stages, int micro_batches, int virtual_stages = 1);

// --- the simulator
// Per-action costs in time units, for one virtual stage's chunk (a rank with v chunks holds
// 1/v of a stage's blocks, so interleaved costs are the plain ones divided by v: the
// simulator does that division itself). Measured costs may replace the defaults.
struct PipeCosts {
  double forward = 1.0, backward = 2.0;          // whole backward
  double backward_input = 1.0, backward_weight = 1.0;  // split backward
  double send = 0.0;                             // a message's transfer time
};

struct PipeSpan {
  int rank = 0;
  PipeAction action;
  double start = 0.0, end = 0.0;
};

struct PipeSimulation {
  double makespan = 0.0;           // the step's time
  std::vector<double> busy;        // per rank: time spent in compute actions
  double bubble_fraction = 0.0;    // 1 - sum(busy) / (P x makespan)
  // Per rank: the most (micro, chunk) pairs whose forward ran and whose backward (the last
  // backward part, when split: W, since the weight gradient reads the saved inputs too)
  // has not, at any moment: the live activations. A forward counts from its start; in a
  // schedule with no backward at all, its activations die when it ends (peak 1).
  std::vector<int> activation_peak;
  std::vector<PipeSpan> spans;     // every compute action, and every receive's wait when it waited
};

// Runs the schedule on a clock: each rank takes its actions in order; a compute action
// takes its cost; a send is eager (it never waits) and delivers after costs.send; a receive
// waits for the matching message (same sender, tag and, in order, micro-batch). Proves the
// schedule sound or throws INVALID_ARGUMENT naming the first fault: a receive with no
// matching send (or one for another micro-batch), a send never received, a compute action
// before its input arrived (a forward of a non-first virtual stage without its receive, a
// backward without its forward or its gradient), an action missing or repeated, or a
// deadlock (no rank can move; the message names each rank's blocked action).
PipeSimulation simulate(const PipeSchedule& schedule, const PipeCosts& costs = {});
// The simulator (and the schedule it runs) grows with stages x micro-batches x virtual
// stages: 1024 x 8192 took 45 s and 8.6 GB. Every caller that simulates from outside input
// (dt_plan_json, dt_pipeline_schedule_json) bounds the product by this, through
// check_simulation_size: DT_ERR_INVALID_ARGUMENT naming the three `names` and the bound.
constexpr int64_t kMaxSimulatedForwards = int64_t(1) << 20;
void check_simulation_size(int64_t stages, int64_t micro_batches, int64_t virtual_stages, const char* stages_name,
                           const char* micro_batches_name, const char* virtual_stages_name);

// The timeline as text, a row per rank, "rank r |...|", `width` columns (8 to 4096) at
// most for the makespan (a whole number of columns per time unit, or per 1/q of one, when
// the spans allow): each column shows the micro-batch computing then (0-9, a-z) or '.'
// idle; under it a marker line: F forward, B backward, b input-gradient backward (Bi),
// w weight-gradient backward (W); with virtual stages a third line gives the chunk. A
// legend line closes it. Legible for P, M <= 16.
std::string timeline_ascii(const PipeSchedule& schedule, const PipeSimulation& sim, int width = 72);
// The simulation as a Chrome trace (chrome://tracing, Perfetto): {"traceEvents": [...]},
// one thread per rank (tid r, metadata "pp rank r"), one complete event ("ph": "X",
// "cat": "compute", named as PipeAction::str(): "F3", "B3c1") per compute action, and one
// ("cat": "wait", "wait recvG3") per receive that waited; 1 cost unit = 1000 us.
nlohmann::json timeline_chrome_trace(const PipeSchedule& schedule, const PipeSimulation& sim);

// --- placing blocks into stages
// The blocks of n_blocks split into `parts` contiguous ranges (virtual stages, in stream
// order), each at least one block, minimising the costliest part: block_cost per block,
// plus first_extra on the first part (the embedding) and last_extra on the last (the head
// and loss). Returns parts + 1 boundaries (0 = b[0] < ... < b[parts] = n_blocks).
// Exact (dynamic programming): among the splits with the least costliest part, the most
// even one (least sum of squared part costs); remaining ties give the extra blocks to the
// later parts (5 blocks over 2: 2, 3), which hold fewer micro-batches in flight in 1F1B.
// INVALID_ARGUMENT when parts > n_blocks ("more stages than blocks"), parts < 1, n_blocks
// outside 1 to 1024, or a cost negative or not finite.
std::vector<int> balance_stages(int n_blocks, int parts, double block_cost = 1.0, double first_extra = 0.0,
                                double last_extra = 0.0);
// Explicit placement: block counts per part ("3,1"), each >= 1, summing to n_blocks, one per
// part. INVALID_ARGUMENT naming what is wrong. Returns boundaries as balance_stages does.
std::vector<int> stages_from_counts(const std::vector<int>& counts, int n_blocks, int parts);

}  // namespace dt::parallel
