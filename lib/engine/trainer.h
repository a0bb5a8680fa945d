// The training engine over a mesh: a layout (parallel/layout.h: each local rank's part of
// the model, its groups, the whole<->part map) plus one TrainEngine per part, with the
// strategies of its axes attached (parallel/axis_strategies.h: the one table of which
// strategy divides the work over which axis). Without a mesh, or on a mesh of one rank, it
// is exactly the single TrainEngine. Nothing here branches on a strategy.
//
// Replicas: the host's model and optimizer are local rank 0's replica; a process that
// drives more ranks (the local backend) builds the others from the model's config and the
// optimizer's kind (Optimizer::clone_over), copies the host's weights into them, and runs
// every replica's step on its rank thread (kernels serial per rank, since the ranks share
// the cores). Under mpi each process holds its one replica. Replicas start bitwise equal
// and stay so: they take the same summed gradient, reduced in the same order on every rank.
//
// What is per replica and what is replica 0's: a train step runs on all; evaluate, the step
// count and generation (through model()) read replica 0; save and load run on every rank,
// each writing and reading its own state. Axes the layout does not place (cp) must be 1.
//
// Model parallelism (a mesh with tp > 1 or pp > 1; trainer_parts.cc): every
// replica is its part of the host model, built from the host's weights and optimizer state:
// split over its tp group (parallel/tp_strategy.h) and holding its pipeline stage's blocks
// (parallel/pipeline_strategy.h: ParallelOptions::pp_schedule runs them). model(i) is then
// replica i's part, and gather_model() writes the trained parts back into the host model
// and optimizer (an all-gather over tp, a broadcast from each stage over pp: under mpirun
// every process calls it). Checkpoints are sharded (trainer_checkpoint.cc): on a mesh each
// rank writes and reads only what it holds, so a checkpoint moves between any layouts.
// DDP or ZeRO over dp combines with both (ZeRO-3 not with pp > 1: named error). Generation runs on the replicas (engine::generate_pipelined
// over pp), except with interleaved stages: then on the gathered host model.
//
// ZeRO (ParallelOptions::zero = 1..3, parallel/zero.h): the replicas shard their state
// over dp instead of replicating it. Each replica's optimizer is the host's cloned over its
// shards, and the host's own optimizer state is then released (its step counter stays).
// evaluate and save then run on every replica (they gather); at stage 3 call gather_model()
// before generating with model(), since the blocks' values exist only while they run.
//
// Memory is credited to ranks (dt_memory_rank_stats): the host's model and optimizer to the
// first local rank, each replica built here to its own.
#pragma once
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <vector>

#include "engine/generate.h"
#include "engine/train_engine.h"
#include "parallel/axis_strategies.h"
#include "parallel/layout.h"

namespace dt::engine {

struct ParallelOptions {
  int64_t bucket_bytes = 25 << 20;  // DDP bucket size (PyTorch's default, 25 MiB)
  int zero = 0;                     // 0: DDP; 1, 2, 3: the ZeRO stage
  // Megatron sequence parallelism on the tp axis (nn/tensor_parallel.h); needs tp > 1.
  bool sequence_parallel = false;
  // Pipeline parallelism on the pp axis (parallel/pipeline_schedule.h): the schedule's
  // generator, the model chunks per rank (interleaved: >= 2), and optionally the blocks of
  // each of the pp x virtual_stages stages in stream order (empty: balanced by estimated
  // cost, the head's counted as vocab / (12 d_model) blocks).
  std::string pp_schedule = "1f1b";
  int virtual_stages = 1;
  std::vector<int> pp_blocks;
  // INVALID_ARGUMENT naming the option (as dt_engine_create's keys name it) and what is
  // accepted. The one range check of these fields: the Trainer and the C API call it.
  void check() const;

  // The parts of it that place the model, and those that choose the strategies.
  parallel::LayoutOptions layout() const { return {sequence_parallel, virtual_stages, pp_blocks}; }
  parallel::StrategyOptions strategies(int64_t micro_batches) const {
    return {bucket_bytes, zero, pp_schedule, micro_batches};
  }
};

// "3,1" -> {3, 1} (empty -> {}): block counts per pipeline stage, each >= 1.
// INVALID_ARGUMENT naming `what` otherwise.
std::vector<int> parse_block_counts(const std::string& text, const std::string& what);

class Trainer {
 public:
  Trainer(std::shared_ptr<comm::Mesh> mesh, nn::GPT& model, optim::Optimizer& opt, const TrainOptions& o,
          const ParallelOptions& p = {});

  // Cancellation (dt_engine_set_cancel; null detaches). While `flag` is raised, train_step,
  // evaluate and generate throw CANCELLED and leave the engine as it was before the call:
  // at once when raised before it (in a process that drives every rank), else at their
  // check points. Alone on the calling thread (one replica, no strategy): before every
  // unit and the update. Over several ranks: where the step's gradients are complete, the
  // ranks agreeing with one small all-reduce over the world (so under mpirun every process
  // attaches a flag, or none); generation on tp replicas agrees the same way before each
  // decode step; over a pipeline (pp > 1) the last stage reads the flag before each unit it
  // samples and the stages then drain what is in flight (engine/generate_pipeline.cc).
  void set_cancel(std::shared_ptr<CancelFlag> flag);

  // The global batch: i32 [B, T], the same on every process; B divisible by dp x micro_batches.
  StepStats train_step(const Tensor& inputs, const Tensor& targets);
  double evaluate(const Tensor& inputs, const Tensor& targets);
  // ZeRO-3: every replica's values whole until the next step (for generation); else a no-op.
  void gather_model();
  // Generation (engine/generate.h) with the trained weights. tp > 1 or pp > 1: on the
  // replicas themselves, each its part of the model (pp: its stage, with several prompts
  // in flight), the KV cache sharded by heads and placed by layers, the same tokens on
  // every rank; on_token fires on this process's first replica only. Otherwise on the
  // model after gather_model() (ZeRO-3: its values whole until the next step). Collective
  // over the mesh: every process of an mpirun calls it.
  GenerateResult generate(const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& opt);
  int64_t step() const { return replicas_[0]->step(); }
  int dp() const { return layout_->dp(); }
  int tp() const { return layout_->tp(); }
  int pp() const { return layout_->pp(); }
  int local_replicas() const { return static_cast<int>(replicas_.size()); }
  TrainEngine& replica(int local_index) { return *replicas_.at(static_cast<size_t>(local_index)); }
  nn::GPT& model(int local_index = 0) { return layout_->part(local_index); }
  // The placement the replicas train on. For serving (serve/model_runner.h), call
  // parts_for_inference() first: every part's values current outside a step (ZeRO-3's
  // gathered, a pipeline's tied copy on its last stage), as generation makes them.
  parallel::Layout& layout() { return *layout_; }
  parallel::Layout& parts_for_inference();

  // The module's parameter views (dt_module_param) on a layout that splits the model: the
  // host model holds the whole values only when gathered. refresh_host gathers them if a
  // step ran since (collective: UNSUPPORTED naming the call under mpirun, where the parts
  // are in other processes); host_written(name) records a write into the host's parameter,
  // which the next step, evaluation, generation or save carries into the parts (and into
  // the optimizer's master of it). On dp layouts the host is local rank 0's replica: reads
  // need nothing and a write reaches the other local replicas the same way. Under ZeRO a
  // write is refused (UNSUPPORTED; strict = false: ignored, for a raw pointer that may
  // never be written): the optimizer's shards own the values.
  void refresh_host();
  void host_written(const std::string& param_name, bool strict = true);

  // Replica 0's state in the single-rank layout, gathered (under ZeRO every replica takes
  // part; at stage 3 the values then stay whole until the next step): for exports and
  // tests. save and load do not gather.
  std::vector<io::CheckpointTensor> state_tensors();
  void save(const std::string& dir, const nlohmann::json& extra = nlohmann::json::object(),
            const std::string& stem = "checkpoint");
  // Runs fn on the world's rank 0 with the whole model as trained so far (gathered first
  // under tp/pp into the host model, made whole under ZeRO-3), for writers of other formats
  // (io/hf_model.h). Collective: every process of an mpirun calls it; the others wait.
  void with_whole_model(const std::function<void(nn::GPT&)>& fn);
  nlohmann::json load(const std::string& dir, const std::string& stem = "checkpoint");
  // An asynchronous save: the state is copied to staging (the memory ledger's "checkpoint"
  // tag: this rank's share) and save_async returns; each rank's thread writes its file
  // while training goes on, and the save commits at the first train_step (or save, load,
  // wait_save, destruction) that finds every rank's write done. A failed write is raised
  // there (DT_ERR_IO) and the last committed checkpoint stands. Collective, as save.
  void save_async(const std::string& dir, const nlohmann::json& extra = nlohmann::json::object(),
                  const std::string& stem = "checkpoint");
  // Waits for a save in flight and commits it (its error raised here); nothing in flight: no-op.
  void wait_save();
  ~Trainer();

 private:
  std::unique_ptr<parallel::Layout> layout_;
  nn::GPT& host_;              // the whole model and optimizer the user gave
  optim::Optimizer& host_opt_;
  // A layout that splits the model: the host's engine, for checkpoints in the single-rank
  // layout (save gathers the parts into it, load cuts its state into parts).
  std::unique_ptr<TrainEngine> host_engine_;
  std::vector<std::unique_ptr<optim::Optimizer>> owned_opts_;
  std::vector<std::unique_ptr<TrainEngine>> replicas_;
  bool host_stale_ = false;            // a step ran since the host last held the parts' values
  std::set<std::string> written_;      // host parameters written since (host_written)
  void build_engines(const TrainOptions& o, const ParallelOptions& p);
  // The parts' whole state into the host model, and with_optimizer into the host's optimizer,
  // whose state is held only until the caller is done (a split layout releases it after the
  // scatter at construction: otherwise the first rank would keep the whole model's
  // optimizer state beside its own part's).
  void gather_parts(bool with_optimizer);
  void scatter_parts();                // the reverse
  void host_optimizer_on_first_rank();  // the host optimizer's state in rank 0's ledger
  void apply_writes();                 // written_ into the parts
  std::map<std::string, Tensor> host_state() const;  // the host's state tensors by name (views)
  void on_all(const std::function<void(int local_index, int rank)>& fn) { layout_->run(fn); }
  // Sharded checkpoints on a mesh (trainer_checkpoint.cc): each rank writes and reads its own.
  void save_sharded(const std::string& dir, const nlohmann::json& extra, const std::string& stem);
  nlohmann::json load_sharded(const std::string& dir, const std::string& stem);
  // A save in two halves: start_save stages each rank's state and starts writing it on a
  // thread of its own; finish_save commits it once every rank's write is done (wait: waits
  // for them; else returns false while any is still writing). Both collective.
  // async: the state copied to this rank's staging buffers first (reused save after save,
  // so warm: the copy is the stall), else written from the live state.
  struct PendingSave;
  std::unique_ptr<PendingSave> pending_save_;
  void start_save(const std::string& dir, const nlohmann::json& extra, const std::string& stem, bool async);
  bool finish_save(bool wait);

 public:
  // A local rank's staging buffers for asynchronous saves (MemTag::Checkpoint), handed out
  // in order and kept for the next save.
  struct Staging {
    std::vector<Tensor> buffers;
    size_t next = 0;
    Tensor take(const Shape& shape, DType dtype);
  };

 private:
  std::vector<Staging> staging_;
  std::shared_ptr<CancelFlag> cancel_;
  bool cancel_raised() const { return cancel_ && cancel_->requested(); }
  // Throws CANCELLED naming `what` if the flag is raised and every rank is in this process
  // (which decides for all of them); under mpirun the ranks' agreement decides instead.
  void cancel_at_entry(const char* what) const;
  // The agreement: true on every rank of the world when `stop_here` (a rank's own
  // decision) is true on any. Collective over the world.
  bool cancel_agreed(int local_index, bool stop_here);
};

}  // namespace dt::engine
