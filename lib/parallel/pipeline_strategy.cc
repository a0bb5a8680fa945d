#include "parallel/pipeline_strategy.h"

#include <algorithm>

#include "core/device_scope.h"
#include "core/error.h"
#include "core/tensor_copy.h"
#include "kernels/ops.h"

namespace dt::parallel {
namespace {
}  // namespace

PipelineStrategy::PipelineStrategy(nn::GPT& stage, comm::Communicator& pp, const std::string& schedule,
                                   int virtual_stages, int64_t micro_batches, Device device,
                                   bool fresh_grads_each_micro_batch)
    : model_(stage), pp_(pp), device_(device), fresh_grads_(fresh_grads_each_micro_batch), stream_(pp) {
  DT_CHECK(micro_batches >= 1 && micro_batches <= (1 << 20),
           "micro_batches = " + std::to_string(micro_batches) + "; accepted: 1 to 2^20");
  train_ = make_pipe_schedule(schedule, pp.size(), static_cast<int>(micro_batches), virtual_stages);
  // A split backward (ZB-H1) finishes a micro-batch's gradients at its weight pass, after
  // later micro-batches' input passes: a strategy reducing each micro-batch's fresh
  // gradients (ZeRO-2) would see them begun twice and freed in between.
  DT_CHECK(!(train_.split_backward() && fresh_grads_),
           "pp schedule \"" + schedule + "\" splits the backward, and its weight passes come after later "
           "micro-batches' input passes, which ZeRO-2's per-micro-batch reduction cannot follow; accepted with it: "
           "zero 0 (DDP) or 1");
  DT_CHECK(static_cast<int>(model_.chunks().size()) == train_.virtual_stages,
           "pipeline stage holds " + std::to_string(model_.chunks().size()) + " chunks of blocks; schedule \"" +
               schedule + "\" runs " + std::to_string(train_.virtual_stages) + " per rank");
}

const std::vector<PipeAction>* PipelineStrategy::pipe_actions(int64_t M, bool forward_only) const {
  refresh_table_ = true;  // a step or an evaluation begins: the last stage's tied copy is refreshed
  if (!forward_only) {
    DT_CHECK(M == train_.micro_batches, "pipeline: a step of " + std::to_string(M) + " micro-batches; the schedule "
                                            "was made for " + std::to_string(train_.micro_batches));
    return &train_.actions[static_cast<size_t>(pp_.rank())];
  }
  // An evaluation: each micro-batch through this rank's chunks in order. Every dependency
  // points to an earlier (micro-batch, virtual stage), the order every rank runs them in,
  // so blocking receives cannot deadlock.
  forward_only_.clear();
  const int r = pp_.rank(), V = train_.num_virtual_stages();
  for (int m = 0; m < static_cast<int>(M); ++m)
    for (int c = 0; c < train_.virtual_stages; ++c) {
      const int vs = train_.virtual_stage(r, c);
      if (vs > 0) forward_only_.push_back({PipeOp::RecvActivation, m, c});
      forward_only_.push_back({PipeOp::Forward, m, c});
      if (vs < V - 1) forward_only_.push_back({PipeOp::SendActivation, m, c});
    }
  return &forward_only_;
}

void PipelineStrategy::communicate(const PipeAction& a, nn::GPTActs& acts) {
  ScopedDevice on(device_);
  const nn::BlockRange r = model_.chunks()[static_cast<size_t>(a.chunk)];
  const int vs = train_.virtual_stage(pp_.rank(), a.chunk);
  const Shape shape = model_.stream_shape(acts.B, acts.T);
  const DType dtype = model_.config().dtype;
  switch (a.op) {
    case PipeOp::SendActivation:
      stream_.send(acts.resid[static_cast<size_t>(r.end)], rank_of(vs + 1), message_tag(false, vs + 1));
      break;
    case PipeOp::RecvActivation: {
      Tensor& x = nn::ensure(acts.resid[static_cast<size_t>(r.begin)], shape, dtype);
      stream_.recv(x, rank_of(vs - 1), message_tag(false, vs));
      break;
    }
    case PipeOp::SendGrad:
      stream_.send(acts.dresid, rank_of(vs - 1), message_tag(true, vs - 1));
      break;
    case PipeOp::RecvGrad: {
      Tensor& g = nn::ensure(acts.dresid, shape, dtype);
      stream_.recv(g, rank_of(vs + 1), message_tag(true, vs));
      break;
    }
    default:
      DT_ASSERT(false);
  }
}

void PipelineStrategy::after_forward(int unit, Part part) {
  // The first stage's token table, current (under ZeRO gathered by now), to the last
  // stage's tied head.
  nn::Parameter* table = model_.token_table();
  if (!(unit == 0 && part == Part::Embed && refresh_table_ && table && model_.config().tied_embeddings &&
        pp_.size() > 1))
    return;
  refresh_table_ = false;
  stream_.send(table->value, pp_.size() - 1, StageTag::TiedTableValue);
}

void PipelineStrategy::before_forward(int unit, Part part) {
  nn::Parameter* copy = model_.tied_copy();
  if (!(unit == 0 && part == Part::Head && refresh_table_ && copy)) return;
  refresh_table_ = false;
  stream_.recv(copy->value, 0, StageTag::TiedTableValue);
}

void PipelineStrategy::after_backward(int unit, Part part, bool last) {
  // Unit 0's gradients are final (for the micro-batch) after its Embed part on every stage.
  if (!(unit == 0 && part == Part::Embed && (last || fresh_grads_))) return;
  ScopedDevice on(device_);
  if (nn::Parameter* copy = model_.tied_copy()) {  // the last stage: its share, sent
    stream_.send(copy->grad, 0, StageTag::TiedTableGrad);
    kernels::fill(copy->grad, 0.0f);
  } else if (nn::Parameter* table = model_.token_table();
             table && model_.config().tied_embeddings && pp_.size() > 1) {  // the first stage: added
    nn::ensure(tied_in_, table->grad.shape(), table->grad.dtype());
    stream_.recv(tied_in_, pp_.size() - 1, StageTag::TiedTableGrad);
    kernels::add(table->grad, tied_in_, table->grad);
  }
}

void PipelineStrategy::finish_grads() { stream_.wait(); }

void PipelineStrategy::gather_model() {
  nn::Parameter* table = model_.token_table();
  if (table && model_.config().tied_embeddings && pp_.size() > 1) {
    stream_.send(table->value, pp_.size() - 1, StageTag::TiedTableValue);
    stream_.wait();
  } else if (nn::Parameter* copy = model_.tied_copy()) {
    stream_.recv(copy->value, 0, StageTag::TiedTableValue);
  }
}

void PipelineStrategy::sum_loss(double* x, size_t n) { exact_sum(pp_, x, n, device_); }

void PipelineStrategy::sum_squared_norm(SquaredNorm& sq) {
  // Stages hold disjoint parameters: both parts add up over pp.
  sq.split = exact_sum(pp_, sq.split, device_);
  sq.replicated = exact_sum(pp_, sq.replicated, device_);
}

void PipelineStrategy::sum_pipe_stats(PipeStats& st) {
  stream_.wait();
  ScopedDevice on(device_);
  const int P = pp_.size();
  Tensor mine = Tensor::zeros({3}, DType::F32);
  mine.data<float>()[0] = static_cast<float>(st.busy_s);
  mine.data<float>()[1] = static_cast<float>(st.wall_s);
  mine.data<float>()[2] = static_cast<float>(st.activation_peak);
  Tensor dev = to_device(mine, device_), all = Tensor::uninit({3 * P}, DType::F32, device_);
  pp_.all_gather(dev.raw(), all.raw(), 3, DType::F32);
  const Tensor host = to_device(all, Device::cpu());
  const float* p = host.data<float>();
  st.stage_busy_s.assign(static_cast<size_t>(P), 0.0);
  st.stage_activation_peak.assign(static_cast<size_t>(P), 0);
  double busy = 0.0, wall = 0.0;
  for (int r = 0; r < P; ++r) {
    st.stage_busy_s[static_cast<size_t>(r)] = p[3 * r];
    st.stage_activation_peak[static_cast<size_t>(r)] = static_cast<int>(p[3 * r + 2]);
    busy += p[3 * r];
    wall = std::max(wall, static_cast<double>(p[3 * r + 1]));
  }
  st.bubble_fraction = wall > 0 ? 1.0 - busy / (static_cast<double>(P) * wall) : 0.0;
}

}  // namespace dt::parallel
