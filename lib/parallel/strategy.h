// The seam between the training engine and parallelism. A Strategy divides one replica's
// training over a mesh axis (DDP and ZeRO over dp; tensor and pipeline parallelism later);
// the engine (engine/train_engine.h) calls its hooks around every unit of a step and holds
// no strategy-specific branch.
//
// Units: 0 = the parameters outside the blocks (embeddings, final norm, head), 1 + i =
// block i (FSDP's wrapping of each block). A training step walks them in this order, each
// micro-batch:
//   forward:  unit 0 (Part::Embed), units 1..n (Part::Block), unit 0 (Part::Head)
//   backward: unit 0 (Part::Head), units n..1 (Part::Block), unit 0 (Part::Embed)
// A unit's gradients are final for the micro-batch after its backward Block part, and unit
// 0's after its backward Embed part (the last to touch it). evaluate() walks the forward
// order alone and then calls end_forward_only().
//
// Strategies own their prefetch policy: they know the order above, so a strategy that
// gathers values (ZeRO-3) starts the next unit's gather in a hook of the current one.
// Several strategies may attach to one engine (DP x TP); hooks run in attach order.
//
// Pipelines: a strategy that places the model in stages (parallel/pipeline_strategy.h) gives
// the engine the step's actions (parallel/pipeline_schedule.h); the engine runs the compute
// ones (forward or backward of micro-batch m on one of the model's chunks, the hooks above
// around each unit as always, in the order the schedule puts them) and hands it the
// communication ones. Without one, the step is the plain list F0 B0 F1 B1 ... on one chunk.
//
// Every hook runs on the replica's rank thread; a strategy is driven by one engine and is
// not thread-safe.
#pragma once
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "nn/gpt.h"
#include "nn/parameter.h"
#include "parallel/local_piece.h"
#include "optim/optimizer.h"
#include "parallel/pipeline_schedule.h"

namespace dt::parallel {

enum class Part { Embed, Block, Head };

// A squared gradient norm in two parts: over elements of parameters split across a
// model-parallel axis (ShardSpec not replicated: each rank holds a different part) and
// over elements of parameters every rank of that axis holds whole (the same gradient on
// each, to be counted once).
struct SquaredNorm {
  double split = 0.0, replicated = 0.0;
  double total() const { return split + replicated; }
};

// What a pipeline step measured: filled by the engine on each rank, then completed over
// the pipeline by its strategy (sum_pipe_stats).
struct PipeStats {
  double busy_s = 0.0, wall_s = 0.0;  // this rank: compute actions' time, the step's time
  int activation_peak = 0;            // this rank: most (micro, chunk) activations alive
  // Over the pp axis, per stage (empty without a pipeline), and the step's bubble:
  // 1 - sum(busy) / (P x the slowest stage's wall time).
  std::vector<double> stage_busy_s;
  std::vector<int> stage_activation_peak;
  double bubble_fraction = 0.0;
};

// What a strategy is attached to: the model's units, in the order above.
struct ModelUnits {
  std::vector<nn::ParamList> params;  // params[u]: unit u's parameters
  std::vector<std::string> names;     // "embed_head", "block.0", ...
  int num_blocks() const { return static_cast<int>(params.size()) - 1; }
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;

  // --- the batch and the optimizer
  // The group the global batch is split over (each rank trains its slice, and the loss and
  // squared norms sum over it); null when this strategy splits no batch.
  virtual comm::Communicator* batch_group() { return nullptr; }
  // The optimizer the engine steps in place of its own (ZeRO: the host's cloned over the
  // shards); null: the engine's own.
  virtual optim::Optimizer* optimizer() { return nullptr; }
  // True when this strategy keeps the gradients (it zeroes them in begin_step, and the
  // engine leaves them alone).
  virtual bool owns_grads() const { return false; }
  // The step's squared gradient norm, in parts (SquaredNorm below). The strategy whose
  // optimizer the engine steps over shards (ZeRO) computes this rank's parts of its own
  // shards and returns true; otherwise the engine sums the optimizer's parameters by spec.
  virtual bool local_squared_norm(SquaredNorm& sq) const { return false; }
  // Then every strategy adds the other ranks' parts over its axis (ZeRO: both parts over
  // dp; TP: the split part over tp, the replicated part being equal on every tp rank), so
  // that every rank ends with the whole gradient's squared norm.
  virtual void sum_squared_norm(SquaredNorm& sq) {}

  // Refuses (INVALID_ARGUMENT, naming `what` and what would work) a micro-batch of B
  // sequences of T tokens this strategy cannot divide; called before any work of a step.
  virtual void check_micro_batch(const std::string& what, int64_t B, int64_t T) const {}

  // This rank's tokens of a micro-batch's rows, in place (context parallelism keeps its two
  // chunks of every sequence); its share of the targets is counted after.
  virtual void select_tokens(Tensor& inputs, Tensor& targets) const {}

  // --- one step (micro is the micro-batch index, last: the step's last micro-batch)
  virtual void begin_step() {}
  virtual void before_forward(int unit, Part part) {}
  virtual void after_forward(int unit, Part part) {}
  virtual void end_forward_only() {}  // evaluate(): the forward ran without a backward
  virtual void before_backward(int unit, Part part) {}
  virtual void after_backward(int unit, Part part, bool last) {}
  virtual void finish_grads() {}  // after the last micro-batch's backward
  virtual void after_update() {}  // after the optimizer stepped (not when a step is skipped)

  // --- pipelines (above)
  // This rank's actions for a step of `micro_batches` (forward_only: an evaluation's),
  // or null: the plain order. At most one attached strategy returns a list.
  virtual const std::vector<PipeAction>* pipe_actions(int64_t micro_batches, bool forward_only) const {
    return nullptr;
  }
  // Runs a communication action on the micro-batch's activations (B, T already set).
  virtual void communicate(const PipeAction& action, nn::GPTActs& acts) {}
  // A micro-batch's loss exists only where the head is: sums the step's loss (x[0, n): the
  // loss, or figures counted where each block or the head is) over the pipeline so that every
  // rank reports it. One collective for the n.
  virtual void sum_loss(double* x, size_t n) {}
  // The share of a micro-batch's targets (i32, ignore_index not counted) on this rank's
  // token rows when it splits them within a replica (sequence parallelism), which weighs the
  // experts' auxiliary losses computed over those rows; 1 otherwise.
  virtual double rows_share(const Tensor& targets, int32_t ignore_index) const { return 1.0; }
  // Figures counted over a micro-batch's tokens (the experts' routing, x[0, n)), summed over
  // the ranks that split those tokens within a replica (sequence parallelism's tp ranks).
  virtual void sum_over_split_tokens(double* x, size_t n) {}
  virtual void sum_pipe_stats(PipeStats& stats) {}

  // --- whole values (generation, evaluation, export)
  virtual void gather_model() {}  // every unit's values whole until the next begin_step

  // --- checkpoints, always in the single-rank layout
  // True when this strategy holds the model's and optimizer's state sharded: whole_state
  // then gathers it (collective over its group: every rank calls), and load_targets /
  // finish_load replace the engine's plain load.
  virtual bool shards_state() const { return false; }
  virtual std::vector<nn::StateTensor> whole_state(optim::Optimizer& opt) { return {}; }
  // Whole tensors, named and shaped as in the checkpoint, for the loader to fill; then
  // finish_load keeps this rank's shards of them.
  virtual std::vector<nn::StateTensor> load_targets(optim::Optimizer& opt) { return {}; }
  virtual void finish_load(optim::Optimizer& opt) {}

  // --- sharded checkpoints (engine/trainer_checkpoint.cc): each rank writes and reads only
  // what it holds, no collective. A state-sharding strategy lists its rank's own elements
  // (LocalPiece::sharded: split over its group, so its group does not dedupe them); after a
  // load wrote them, finish_local_load rebuilds what derives from them (ZeRO-1/2's whole
  // values: gathered over its group, collective).
  virtual std::vector<LocalPiece> local_state(optim::Optimizer& opt) { return {}; }
  virtual void finish_local_load(optim::Optimizer& opt) {}
};

// x summed over `group` exactly enough for a loss or a squared norm (a float pair hi + lo,
// x to about 2^-48, each summed in f32). Inf or NaN stays non-finite. device: where the
// group's buffers must live (an NCCL communicator takes device buffers only). Collective.
double exact_sum(comm::Communicator& group, double x, Device device);
// The same for x[0, n) in place, in one all-reduce.
void exact_sum(comm::Communicator& group, double* x, size_t n, Device device);

// The gradients of `params` (one dtype, on `device`) summed over `group` in place, by one
// all-reduce of them packed into `flat` (made or grown as needed, MemTag::CommBuffer). Collective.
void all_reduce_grads(comm::Communicator& group, const nn::ParamList& params, Tensor& flat, Device device);

// True after the backward part that leaves a unit's gradients final for the micro-batch.
inline bool grads_final(Part part) { return part != Part::Head; }

}  // namespace dt::parallel
