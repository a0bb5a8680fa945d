// The training engine: one optimizer step from a global batch. It splits the batch into
// micro-batches (gradient accumulation), runs forward and backward on each, clips the global
// gradient norm, sets the schedule's learning rate and steps the optimizer.
//
// Weighting: the batch loss is the mean over ALL non-ignored target tokens of the batch, so
// micro-batch i's backward is scaled by count_i / total (its share of those tokens), not by a
// flat 1 / num_micro: with ignored targets (AdditionDataset) the micro-batches hold different
// counts, and only this weighting makes the accumulated gradient the full batch's gradient.
// Without ignored targets count_i / total == 1 / num_micro.
//
// Mixed precision (DESIGN §4): a bf16 or f16 model keeps its params, grads and activations in
// that dtype and the optimizer keeps f32 masters. f16 also needs dynamic loss scaling (its
// range is too narrow for small gradients): backward runs with grad_scale times the scale,
// one pass over the grads gives the global norm of the scaled grads, a non-finite norm skips
// the step (parameters, optimizer state and step count unchanged; the scale backs off),
// and otherwise 1 / scale and the clipping coefficient fold into the optimizer's grad_scale.
// bf16 has f32's range and needs none of this. The scaler's state is part of
// state_tensors(), so checkpoints resume it.
//
// Parallelism: strategies (parallel/strategy.h: DDP, ZeRO, ...) attach to the engine, which
// runs forward and backward unit by unit (the non-block parameters, then each block) and
// calls their hooks around each unit; the step loop below knows no strategy by name. The
// last micro-batch's backward also calls the grad-ready hook with each unit whose gradient
// is final (block n-1, ..., block 0, then the embeddings, final norm and head).
#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "comm/mesh.h"
#include "core/cancel.h"
#include "io/checkpoint.h"
#include "nn/gpt.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "parallel/strategy.h"

namespace dt::engine {

struct TrainOptions {
  int64_t micro_batches = 1;    // gradient accumulation steps per optimizer step
  double max_grad_norm = 0.0;   // <= 0: no clipping (the norm is still reported)
  optim::LrSchedule schedule = optim::LrSchedule::constant(1e-3f);
  int32_t ignore_index = -1;    // targets equal to it carry no loss
  optim::LossScalerOptions loss_scaler;  // validated always, used only for f16 models
  // INVALID_ARGUMENT naming the option (as dt_engine_create's keys name it) and what is
  // accepted. The one range check of these fields: the engine and the C API call it.
  void check() const;
};

struct StepStats {
  int64_t step = 0;          // optimizer updates taken after this step
  double loss = 0.0;         // mean over the batch's non-ignored target tokens
  double grad_norm = 0.0;    // global L2 norm before clipping
  float lr = 0.0f;
  int64_t tokens = 0;        // B * T inputs processed
  double seconds = 0.0, tokens_per_s = 0.0;
  double loss_scale = 1.0;   // the scale this step's backward used (1 unless f16)
  bool skipped = false;      // f16 overflow: no update was taken (grad_norm is then Inf/NaN)
  parallel::PipeStats pipeline;  // busy and wall time, live activations (and over pp: the bubble)
  // A mixture of experts' routing over the whole step (every block, micro-batch and rank):
  // kept tokens per expert summed over blocks, drops, and the auxiliary losses' terms of the
  // objective (per block and micro-batch, weighted as the loss is). Empty for a dense model.
  nn::MoEStats moe;
};

// One JSON line (no newline) for a metrics log.
std::string metrics_json(const StepStats& s);

// Called with parameters whose gradients are final for this step (see above).
using GradReadyHook = std::function<void(const nn::ParamList& ready)>;

class TrainEngine {
 public:
  // mesh may be null (plain single-device training, or a replica that a Trainer drives on
  // its rank thread); otherwise its world must be 1 (engine/trainer.h runs several).
  // model and opt must outlive the engine; opt must be built over model.parameters().
  TrainEngine(std::shared_ptr<comm::Mesh> mesh, nn::GPT& model, optim::Optimizer& opt, const TrainOptions& o);

  // inputs, targets: i32 [B, T], B > 0 and divisible by micro_batches.
  StepStats train_step(const Tensor& inputs, const Tensor& targets);
  // The batch loss without touching parameters, gradients or the optimizer.
  double evaluate(const Tensor& inputs, const Tensor& targets);

  void set_grad_ready_hook(GradReadyHook hook) { hook_ = std::move(hook); }
  // Cancellation (dt_engine_set_cancel; engine/trainer.h installs these, either may be
  // empty). local(): read before every unit of a step or an evaluation and before the
  // update; when it says stop, the call throws CANCELLED from there with the gradients
  // cleared. Only an engine that runs alone (runs_alone()) reads it: nothing is in flight
  // between its units. agreed(): called by every rank where a step's gradients are
  // complete, a collective with the same answer everywhere; true ends the step there
  // without an update (as an f16 overflow skips one) and cancelled() then says so.
  void set_cancel(std::function<bool()> local, std::function<bool()> agreed);
  bool cancelled() const { return cancelled_; }
  // No mesh and no strategy: every step runs on the calling thread and talks to nobody.
  bool runs_alone() const { return !mesh_ && strategies_.empty(); }
  // The model's units, in the order strategies see them (parallel/strategy.h).
  const parallel::ModelUnits& units() const { return units_; }
  // Attaches a strategy (call on the rank thread that will train, before the first step).
  // With one that splits the batch (Strategy::batch_group), train_step takes the GLOBAL
  // batch (the same on every rank, B divisible by the group's size x micro_batches), trains
  // this rank's B / size rows, and scales its backward by its share of the global batch's
  // target tokens, so the summed gradient is the global batch's and every replica takes the
  // same step; the reported loss is the global mean. A strategy with its own optimizer
  // (ZeRO) replaces the engine's. With one that shards the state, every later call that
  // touches the model's values (train_step, evaluate, gather_model, state_tensors, save,
  // load) is collective over its group: every replica makes it.
  void attach(std::unique_ptr<parallel::Strategy> strategy);
  // The attached strategy of type S, or null.
  template <class S>
  const S* strategy() const {
    for (auto& s : strategies_)
      if (auto* p = dynamic_cast<const S*>(s.get())) return p;
    return nullptr;
  }
  // The actions the last train_step or evaluate ran on this rank, in order (the schedule's,
  // parallel/pipeline_schedule.h; without a pipeline the plain F0 B0 F1 B1 ...).
  const std::vector<parallel::PipeAction>& executed_actions() const { return executed_; }
  // True when an attached strategy holds the state sharded (see attach).
  bool state_sharded() const { return sharded_state_ != nullptr; }
  // Every unit's values whole and kept until the next train_step (ZeRO-3: so that the model
  // can generate); a no-op for strategies that keep them whole anyway.
  void gather_model();
  int64_t step() const { return opt_->steps(); }
  const optim::Optimizer& optimizer() const { return *opt_; }
  // The f16 loss scaler; null for f32 and bf16 models.
  const optim::DynamicLossScaler* loss_scaler() const { return scaler_.get(); }
  const TrainOptions& options() const { return opt_cfg_; }

  // Parameters and optimizer state (incl. "optimizer.step") as checkpoint entries; for f16
  // models also "loss_scaler.scale" (f32 [1]) and "loss_scaler.good_steps" (i64 [1]).
  std::vector<io::CheckpointTensor> state_tensors();
  // Writes "<dir>/<stem>.index.json" and its data file. The metadata records the step and
  // the model config (io/model_config.h); `extra` lands there too (e.g. the sampler's epoch
  // and position) and load returns it. load refuses a checkpoint of another model config
  // (INVALID_ARGUMENT naming the field) before touching anything. One rank's engine (on a
  // mesh, Trainer::save writes each rank's shard: engine/trainer_checkpoint.cc).
  void save(const std::string& dir, const nlohmann::json& extra = nlohmann::json::object(),
            const std::string& stem = "checkpoint");
  nlohmann::json load(const std::string& dir, const std::string& stem = "checkpoint");
  // load() in two halves, for a caller that fills the state from memory (a tp Trainer
  // cutting its host's state into parts): the tensors to write, in the single-rank layout
  // and named as state_tensors() names them, then finish_load() to take them in (a sharding
  // strategy keeps its shards of them). Nothing is checked between the two.
  std::vector<io::CheckpointTensor> load_targets();
  void finish_load();
  // Sharded checkpoints (engine/trainer_checkpoint.cc): this rank's own elements of its
  // state, as views (a state-sharding strategy's shards, else every tensor whole), no
  // collective; then, after a load wrote into them, finish_local_load() takes them in
  // (collective where the strategy's is).
  std::vector<parallel::LocalPiece> local_state();
  void finish_local_load();
  // Runs f (once) before the next change of the state (the optimizer's update): an
  // asynchronous save copying the state meanwhile waits there.
  void set_before_update(std::function<void()> f) { before_update_ = std::move(f); }
  // Runs the pending before_update now (a write into the parameters is about to happen).
  void wait_before_update() {
    if (auto f = std::move(before_update_)) {
      before_update_ = nullptr;
      f();
    }
  }
  // The metadata a save records (step, model config, `extra`), and the checks a load makes
  // before it writes anything (the model config; the f16 scaler's state against this
  // engine's options). Not collective.
  nlohmann::json checkpoint_metadata(const nlohmann::json& extra) const;
  // Returns the checkpoint's index, read once for the loads that follow.
  nlohmann::json check_checkpoint(const std::string& dir, const std::string& stem);

  // What train_step ("train_step") or evaluate ("evaluate") checks before any work: shapes,
  // token ids, the split over dp and micro-batches, every strategy's check_micro_batch.
  // INVALID_ARGUMENT naming what is wrong. A Trainer calls it on its own thread first, so
  // a bad batch never reaches the rank threads (where it would fail the mesh).
  void check_batch(const Tensor& inputs, const Tensor& targets, const char* what) const;

 private:
  // --- the step's actions (engine/step_actions.cc)
  struct MicroBatch {
    Tensor in, tg;
    float grad_scale = 0.0f;  // its share of the batch's targets, times the loss scale
    double share = 0.0;       // its share of the batch's targets
    float aux_share = 1.0f;   // this rank's rows' share of its targets (GPTActs::aux_share)
  };
  // This rank's actions: an attached pipeline's, or the plain order.
  const std::vector<parallel::PipeAction>& actions_for(int64_t micro_batches, bool forward_only);
  // Runs them over the micro-batches; returns the summed (not mean) loss of those whose
  // head ran here. Fills stats' figures of this rank.
  double run_actions(const std::vector<parallel::PipeAction>& actions, const std::vector<MicroBatch>& mbs,
                     bool forward_only, parallel::PipeStats& stats);
  // Forward of one chunk of the model (its blocks; the embedding on the first, the head and
  // loss on the last), unit by unit with the strategies' hooks around each: the chunk's
  // summed loss (0 without the head); and backward.
  double forward_chunk(int chunk, const MicroBatch& mb, nn::GPTActs& a);
  void backward_chunk(int chunk, const MicroBatch& mb, nn::GPTActs& a, bool last);
  template <class Compute>
  void forward_unit(int unit, parallel::Part part, const std::string& what, Compute&& compute);
  template <class Compute>
  void backward_unit(int unit, parallel::Part part, bool last, const std::string& what, Compute&& compute);
  int64_t count_targets(const Tensor& tg) const;
  double batch_sum(double x) const;  // x summed over the batch group (identity without one)
  nn::MoEStats routed_;              // the experts' routing in the step so far (this rank's part)
  nn::MoEStats sum_routing();        // routed_ over every rank of the step (collective)
  void run(const std::function<void()>& fn);
  // The optimizer step after the grads are complete; fills st's grad_norm, lr, loss_scale
  // and skipped. loss_scale: the scale backward ran with.
  void finish_step(StepStats& st, float loss_scale);
  void clear_grads();         // unless a strategy keeps them
  void cancel_point(const char* what);  // throws CANCELLED when cancel_local_ says stop
  void save_scaler_state();  // scaler -> its two state tensors
  std::vector<io::CheckpointTensor> scaler_tensors();

  std::shared_ptr<comm::Mesh> mesh_;
  nn::GPT& model_;
  optim::Optimizer* opt_;  // the host's, or a strategy's (ZeRO's shard optimizer)
  TrainOptions opt_cfg_;
  GradReadyHook hook_;
  std::function<bool()> cancel_local_, cancel_agreed_;
  bool cancelled_ = false;
  const char* call_ = "train_step";  // the call running: what a cancellation names
  std::vector<std::unique_ptr<nn::GPTActs>> acts_pool_;  // activations of finished micro-batches, reused
  std::vector<parallel::PipeAction> plain_, executed_;
  std::vector<std::function<void()>>* postponed_ = nullptr;  // a split backward's after-hooks
  std::vector<int> block_unit_;  // per whole-model block: its unit, or -1 (another stage's)
  parallel::ModelUnits units_;
  std::vector<std::unique_ptr<parallel::Strategy>> strategies_;
  comm::Communicator* batch_ = nullptr;               // the group the batch is split over
  parallel::Strategy* sharded_state_ = nullptr;       // the strategy that shards the state
  std::function<void()> before_update_;               // set_before_update
  bool owned_grads_ = false;                          // a strategy zeroes the grads
  std::unique_ptr<optim::DynamicLossScaler> scaler_;  // f16 only
  Tensor scaler_scale_, scaler_good_;                 // its checkpointed state, kept current
};

}  // namespace dt::engine
