// Pipeline parallelism as a Strategy (parallel/strategy.h), over the pp axis. Each pp rank's
// model is its stage: the chunks of blocks a schedule gives it (nn::GPT built with
// BlockRanges; the embedding on the first, the head and loss on the last). This strategy
// owns the schedule (parallel/pipeline_schedule.h), hands the engine this rank's actions,
// and carries the stream between stages:
//  - Activations and their gradients move through the stage stream (parallel/
//    stage_stream.h) on the pp communicator, tagged by message_tag (stage_tags.h). Shapes
//    are agreed once, not sent: every stage derives the stream's shape from the micro-
//    batch (GPT::stream_shape). A send copies the tensor and does not wait (the schedules
//    assume eager sends); a receive blocks, and its wait is the bubble the trace shows.
//  - Tied embeddings: the last stage's head reads a copy of the token table (GPT::
//    tied_copy). Its gradient goes to the first stage, which adds it to its own before any
//    data-parallel strategy (attached after this one) reduces the table's gradient: once
//    per step, or every micro-batch when that strategy takes fresh gradients each micro-
//    batch (ZeRO-2). The first stage, which alone updates the table, sends the values back
//    at each step's (or evaluation's) first forward.
//  - The loss exists on the last stage only: it is summed over pp so every rank reports
//    it; the gradient norm's parts are summed over pp (stages hold disjoint parameters), so
//    clipping and f16 loss-scaling decisions are global and every stage takes the same one.
#pragma once
#include <memory>

#include "parallel/stage_stream.h"
#include "parallel/strategy.h"

namespace dt::parallel {

class PipelineStrategy final : public Strategy {
 public:
  // stage: this rank's model (its chunks, in virtual-stage order: chunk c is virtual stage
  // c x P + rank); pp: the communicator over the pp axis; schedule: a generator's name for
  // training steps of micro_batches; device: the model's; fresh_grads_each_micro_batch: a
  // strategy attached after this one takes each micro-batch's gradients (ZeRO-2).
  // INVALID_ARGUMENT when the schedule does not fit (make_pipe_schedule's checks, or the
  // stage's chunk count is not the schedule's virtual stages).
  PipelineStrategy(nn::GPT& stage, comm::Communicator& pp, const std::string& schedule, int virtual_stages,
                   int64_t micro_batches, Device device, bool fresh_grads_each_micro_batch = false);
  std::string name() const override { return "pp"; }
  const PipeSchedule& schedule() const { return train_; }

  const std::vector<PipeAction>* pipe_actions(int64_t micro_batches, bool forward_only) const override;
  void communicate(const PipeAction& action, nn::GPTActs& acts) override;
  void before_forward(int unit, Part part) override;
  void after_forward(int unit, Part part) override;
  void after_backward(int unit, Part part, bool last) override;
  void finish_grads() override;
  // The last stage's tied copy made current (generation reads it outside any step).
  void gather_model() override;
  void sum_loss(double* x, size_t n) override;
  void sum_squared_norm(SquaredNorm& sq) override;
  void sum_pipe_stats(PipeStats& stats) override;

 private:
  int rank_of(int virtual_stage) const { return virtual_stage % pp_.size(); }

  nn::GPT& model_;
  comm::Communicator& pp_;
  Device device_;
  bool fresh_grads_;
  PipeSchedule train_;
  mutable std::vector<PipeAction> forward_only_;  // an evaluation's actions (built on first use)
  mutable bool refresh_table_ = false;            // the tied table's values go to the last stage
  StageStream stream_;  // every message of this rank to another stage
  Tensor tied_in_;  // the first stage: the last stage's tied-table gradient, received
};

}  // namespace dt::parallel
