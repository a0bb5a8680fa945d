// The training engine over a mesh: one TrainEngine replica per local rank, data parallel
// over the mesh's dp axis (DDP). Without a mesh, or on a mesh of one rank, it is exactly
// the single TrainEngine.
//
// Replicas: the host's model and optimizer are local rank 0's replica; a process that
// drives more ranks (the local backend) builds the others from the model's config and the
// optimizer's kind (Optimizer::clone_over), copies the host's weights into them, and runs
// every replica's step on its rank thread (kernels serial per rank, since the ranks share
// the cores). Under mpi each process holds its one replica. Replicas start bitwise equal
// and stay so: they take the same summed gradient, reduced in the same order on every rank.
//
// What is per replica and what is replica 0's: a train step runs on all; evaluate, the step
// count, generation (through model()) and save read replica 0 (the world's rank 0 writes the
// files); load loads every replica. Axes other than dp and tp must be 1.
//
// Model parallelism (a mesh with tp > 1 or pp > 1; trainer_model_parallel.cc): every
// replica is its part of the host model, built from the host's weights and optimizer state:
// split over its tp group (parallel/tp_strategy.h) and holding its pipeline stage's blocks
// (parallel/pipeline_strategy.h: ParallelOptions::pp_schedule runs them). model(i) is then
// replica i's part, and gather_model() writes the trained parts back into the host model
// and optimizer (an all-gather over tp, a broadcast from each stage over pp: under mpirun
// every process calls it). Checkpoints are the host's, in the single-rank layout: save
// gathers first (the world's rank 0 writes), load cuts the loaded state into parts, so a
// checkpoint moves between any layouts. DDP or ZeRO over dp combines with both (ZeRO-3 not
// with pp > 1: named error). Generation runs on the replicas (engine::generate_pipelined
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
#include <memory>
#include <vector>

#include "engine/generate.h"
#include "engine/train_engine.h"

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
  int zero() const { return zero_; }
  // Generation (engine/generate.h) with the trained weights. tp > 1 or pp > 1: on the
  // replicas themselves, each its part of the model (pp: its stage, with several prompts
  // in flight), the KV cache sharded by heads and placed by layers, the same tokens on
  // every rank; on_token fires on this process's first replica only. Otherwise on the
  // model after gather_model() (ZeRO-3: its values whole until the next step). Collective
  // over the mesh: every process of an mpirun calls it.
  GenerateResult generate(const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& opt);
  int64_t step() const { return replicas_[0]->step(); }
  int dp() const { return dp_; }
  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int local_replicas() const { return static_cast<int>(replicas_.size()); }
  TrainEngine& replica(int local_index) { return *replicas_.at(static_cast<size_t>(local_index)); }
  nn::GPT& model(int local_index = 0) { return *models_.at(static_cast<size_t>(local_index)); }
  // For serving (serve/model_runner.h), which runs its own steps on the replicas: a rank's
  // coordinates (all 0 without a mesh), a replica's pp communicator (null without pp), and
  // fn(local_index, rank) run on every local replica's rank thread at once (so their
  // collectives meet; on the caller's thread without a mesh).
  comm::Coords coords(int rank) const { return mesh_ ? mesh_->coords(rank) : comm::Coords{}; }
  bool in_process() const { return !mesh_ || static_cast<int>(mesh_->local_ranks().size()) == mesh_->world_size(); }
  int rank_of(const comm::Coords& c) const { return mesh_ ? mesh_->rank_of(c) : 0; }
  // A replica's communicator over the whole mesh (made on first use: collective under MPI).
  comm::Communicator& world_comm(int local_index) {
    return mesh_->comm(mesh_->local_ranks().at(static_cast<size_t>(local_index)), "world");
  }
  comm::Communicator* pp_comm(int local_index) { return pp_comms_.empty() ? nullptr : pp_comms_.at(static_cast<size_t>(local_index)); }
  int virtual_stages() const { return virtual_stages_; }
  void run_on_replicas(const std::function<void(int local_index, int rank)>& fn) {
    if (mesh_) on_all(fn);
    else fn(0, 0);
  }

  // Replica 0's state in the single-rank layout (under ZeRO every replica takes part in
  // gathering it; at stage 3 the values then stay whole until the next step).
  std::vector<io::CheckpointTensor> state_tensors();
  void save(const std::string& dir, const nlohmann::json& extra = nlohmann::json::object(),
            const std::string& stem = "checkpoint");
  // Runs fn on the world's rank 0 with the whole model as trained so far (gathered first
  // under tp/pp into the host model, made whole under ZeRO-3), for writers of other formats
  // (io/hf_model.h). Collective: every process of an mpirun calls it; the others wait.
  void with_whole_model(const std::function<void(nn::GPT&)>& fn);
  nlohmann::json load(const std::string& dir, const std::string& stem = "checkpoint");

 private:
  std::shared_ptr<comm::Mesh> mesh_;
  int dp_ = 1, zero_ = 0, tp_ = 1, pp_ = 1, virtual_stages_ = 1;
  std::vector<int> boundaries_;  // pp > 1: the virtual stages' first blocks, then n_layer
  // The data-parallel strategy over dp that ParallelOptions names: DDP, or a ZeRO stage.
  static std::unique_ptr<parallel::Strategy> data_parallel_strategy(const ParallelOptions& p, const TrainEngine& engine,
                                                                    comm::Communicator& dp,
                                                                    const optim::Optimizer& prototype);
  // Model parallel (trainer_model_parallel.cc): every local rank's replica is its part of
  // the host model, split over tp and its pipeline stage (DDP or ZeRO over dp beside it);
  // gather_model puts the parts back into the host model and optimizer; checkpoints go
  // through the host's engine.
  void build_model_parallel(nn::GPT& host, optim::Optimizer& opt, const TrainOptions& o, const ParallelOptions& p,
                            const std::vector<Device>& devices);
  void gather_model_parallel();   // the replicas' parts into the host model and optimizer
  void scatter_model_parallel();  // the reverse
  // The host's state tensors by name (views on them): what both of those read or write.
  std::map<std::string, Tensor> host_state() const;
  int pp_owner(const std::string& state_name) const;  // the stage holding it; -1: every stage
  bool model_parallel() const { return tp_ > 1 || pp_ > 1; }
  nn::GPT* host_ = nullptr;        // model parallel: the whole model and optimizer the user gave,
  optim::Optimizer* host_opt_ = nullptr;
  std::unique_ptr<TrainEngine> host_engine_;  // and their engine, for checkpoints
  std::vector<comm::Communicator*> tp_comms_, pp_comms_;  // each replica's over tp, pp
  // The split of each parameter of a replica, by name; a state tensor "<param>.<suffix>" of
  // the parameter's shape splits as it does, anything else is replicated.
  std::map<std::string, const nn::Parameter*> tp_params_;  // the local replicas', by name
  nn::ShardSpec tp_spec_of(const std::string& state_name, const Shape& part_shape) const;
  // Runs fn(replica) on every replica's rank thread (all replicas take part in collectives).
  void on_all(const std::function<void(int local_index, int rank)>& fn);
  std::vector<nn::GPT*> models_;
  std::vector<std::unique_ptr<nn::GPT>> owned_models_;
  std::vector<std::unique_ptr<optim::Optimizer>> owned_opts_;
  std::vector<std::unique_ptr<TrainEngine>> replicas_;
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
