// The Trainer's parts (engine/trainer.h): generation on them, and the host model and
// optimizer kept in step with them through the layout's whole<->part map (checkpoints, the
// module's parameter views).
#include "core/device_scope.h"
#include "core/error.h"
#include "core/tensor_copy.h"
#include "engine/trainer.h"

namespace dt::engine {

GenerateResult Trainer::generate(const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& opt) {
  // One replica of the whole model: the plain path.
  cancel_at_entry("generate");
  apply_writes();
  // This process's own decision to stop: the flag, or the caller's (a v2 callback's).
  std::function<bool()> local_stop;
  if (cancel_ || opt.should_stop)
    local_stop = [this, &opt] { return cancel_raised() || (opt.should_stop && opt.should_stop()); };
  GenerateOptions here = opt;  // on this thread it decides alone
  here.should_stop = local_stop;
  if (!layout_->splits_model()) {
    gather_model();
    return engine::generate(model(0), prompts, here);
  }
  if (!layout_->parts_decode()) {  // the gathered host generates (layout.h says when)
    gather_model();
    return engine::generate(host_, prompts, here);
  }
  // On the replicas themselves: each its tp part of its stage, the KV cache sharded by
  // heads and placed by layers; every replica ends with the same tokens.
  std::vector<GenerateResult> out(replicas_.size());
  on_all([&](int li, int) {
    const size_t i = static_cast<size_t>(li);
    replicas_[i]->gather_model();  // ZeRO-3 over dp: the values whole until the next step
    GenerateOptions mine = opt;
    if (li != 0) mine.on_token = nullptr;
    // tp: the replicas agree before each step; a pipeline's last stage decides for all.
    mine.should_stop = local_stop;
    if (local_stop && pp() == 1) mine.should_stop = [this, li, &local_stop] { return cancel_agreed(li, local_stop()); };
    comm::Communicator* stages = layout_->group(li, comm::kPp);
    out[i] = stages ? engine::generate_pipelined(model(li), *stages, prompts, mine) : engine::generate(model(li), prompts, mine);
  });
  return out[0];
}

std::map<std::string, Tensor> Trainer::host_state() const {
  // A split layout's host has its own engine; a dp layout's host is local part 0's engine.
  TrainEngine& e = host_engine_ ? *host_engine_ : *replicas_[0];
  std::map<std::string, Tensor> whole;
  for (auto& t : e.state_tensors()) whole[t.name] = t.tensor;
  return whole;
}

void Trainer::scatter_parts() {
  const std::map<std::string, Tensor> whole = host_state();
  on_all([&](int li, int) {
    TrainEngine& r = *replicas_[static_cast<size_t>(li)];
    // The tensors a load of this part fills (a sharding strategy's whole ones: it keeps its
    // shards of them in finish_load), each from its slice of the host's.
    layout_->scatter(li, whole, r.load_targets());
    r.finish_load();
  });
  host_stale_ = false;
}

void Trainer::gather_parts(bool with_optimizer) {
  // Every part's state (parameters, optimizer state; under ZeRO first gathered over dp)
  // made whole through the layout, into the host's tensors. Collective: under mpirun every
  // process calls it, and each assembles the same whole. Without the optimizer, its released
  // state is not in host_state() and the parts' tensors of it are left out.
  if (with_optimizer && host_opt_.released()) {
    host_opt_.reinstate_state();
    host_optimizer_on_first_rank();
  }
  std::map<std::string, Tensor> host = host_state();
  on_all([&](int li, int) {
    parallel::NamedTensors mine;
    for (nn::StateTensor& t : replicas_[static_cast<size_t>(li)]->state_tensors())
      if (host.count(t.name)) mine.push_back(std::move(t));
    layout_->gather(li, mine, host);
  });
  host_engine_->finish_load();
  host_stale_ = false;
}

parallel::Layout& Trainer::parts_for_inference() {
  apply_writes();
  on_all([&](int li, int) { replicas_[static_cast<size_t>(li)]->gather_model(); });
  return *layout_;
}

void Trainer::refresh_host() {
  if (!host_stale_) return;
  if (!layout_->in_process())
    fail(DT_ERR_UNSUPPORTED, "reading a parameter view of a model split over tp or pp under mpirun: the other "
                             "parts are in other processes, and gathering them is collective; accepted: "
                             "dt_engine_save (every process calls it) and read the checkpoint, or a local mesh");
  std::map<std::string, Tensor> whole;
  for (nn::Parameter* q : host_.parameters()) whole[q->name] = q->value;
  on_all([&](int li, int) {
    TrainEngine& r = *replicas_[static_cast<size_t>(li)];
    r.gather_model();  // ZeRO-3 over dp: the values whole until the next step
    parallel::NamedTensors mine;
    for (nn::Parameter* q : model(li).parameters()) mine.push_back({q->name, q->value, q->spec});
    layout_->gather(li, mine, whole);
  });
  host_stale_ = false;
}

void Trainer::host_written(const std::string& name, bool strict) {
  if (replicas_[0]->state_sharded() && !strict) return;
  if (replicas_[0]->state_sharded())
    fail(DT_ERR_UNSUPPORTED, "writing parameter \"" + name + "\" through a view under ZeRO: the optimizer's "
                             "shards own the values and would overwrite the write at the next step; accepted: "
                             "dt_engine_load from a checkpoint, or an engine without zero");
  written_.insert(name);
}

void Trainer::apply_writes() {
  if (written_.empty()) return;
  const std::set<std::string> names = std::move(written_);
  written_.clear();
  // A parameter view writes the host's tensor: each part takes its slice (a dp replica the
  // whole, a split part its tp slice where its stage holds it), and each optimizer's master
  // follows, or the next step would put back the value before the write.
  if (!host_opt_.released()) host_opt_.sync_masters_from_params(&names);
  on_all([&](int li, int) {
    if (layout_->part_is_host(li)) return;
    layout_->scatter_values(li, &names);
    if (optim::Optimizer* own = owned_opts_[static_cast<size_t>(li)].get()) own->sync_masters_from_params(&names);
  });
}

}  // namespace dt::engine
