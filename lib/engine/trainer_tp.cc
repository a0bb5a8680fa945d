// The Trainer over a mesh with tp > 1 (engine/trainer.h): one tensor-parallel replica per
// local rank, each its part of the host model and optimizer, with DDP or ZeRO over dp.
#include "core/device_scope.h"
#include "core/error.h"
#include "core/rank_scope.h"
#include "core/tensor_copy.h"
#include "engine/trainer.h"
#include "parallel/tp_strategy.h"

namespace dt::engine {

nn::ShardSpec Trainer::tp_spec_of(const std::string& name, const Shape& part_shape) const {
  // "<param>" or "<param>.<suffix>" (a moment, a master) of the parameter's part shape.
  for (size_t end = name.size(); end != std::string::npos && end > 0; end = name.rfind('.', end - 1)) {
    auto it = tp_params_.find(name.substr(0, end));
    if (it != tp_params_.end()) return it->second->shape == part_shape ? it->second->spec : nn::ShardSpec{};
  }
  return nn::ShardSpec{};
}

void Trainer::build_tensor_parallel(nn::GPT& host, optim::Optimizer& opt, const TrainOptions& o,
                                    const ParallelOptions& p, const std::vector<Device>& devices) {
  tp_ = mesh_->axis_size(comm::kTp);
  const size_t local = mesh_->local_ranks().size();
  host_ = &host;
  host_opt_ = &opt;
  // The host's engine: checkpoints of a tp run are the host model's, gathered (save) or
  // loaded there first and then cut into parts (load), in the single-rank layout.
  host_engine_ = std::make_unique<TrainEngine>(nullptr, host, opt, o);
  const bool on_gpus = devices[0].type == DeviceType::CUDA;
  if (on_gpus) {
    mesh_->make_device_comms("tp", devices);
    if (dp_ > 1) mesh_->make_device_comms("dp", devices);
  }
  models_.assign(local, nullptr);
  owned_models_.resize(local);
  owned_opts_.resize(local);
  replicas_.resize(local);
  tp_comms_.assign(local, nullptr);
  // ZeRO-2/3 zero the gradients before each micro-batch's backward and take them after it.
  const bool fresh_grads = dp_ > 1 && p.zero >= 2;
  // Each replica is built on its rank thread, so that its parameters are its rank's memory
  // and device, and its communicators made where they are used.
  mesh_->run([&](int li, int rank) {
    const size_t i = static_cast<size_t>(li);
    ScopedRank owner(rank);
    ScopedDevice on(devices[i]);
    comm::Communicator& tp = on_gpus ? mesh_->device_comm(rank, "tp") : mesh_->comm(rank, "tp");
    tp_comms_[i] = &tp;
    owned_models_[i] = std::make_unique<nn::GPT>(host.config(), nn::TpGroup{&tp, p.sequence_parallel});
    nn::GPT& m = *owned_models_[i];
    owned_opts_[i] = opt.clone_over(m.parameters());
    models_[i] = &m;
    TrainEngine& r = *(replicas_[i] = std::make_unique<TrainEngine>(nullptr, m, *owned_opts_[i], o));
    r.attach(std::make_unique<parallel::TpStrategy>(r.units(), tp, devices[i], p.sequence_parallel, fresh_grads));
    if (dp_ > 1) {
      comm::Communicator& dp = on_gpus ? mesh_->device_comm(rank, "dp") : mesh_->comm(rank, "dp");
      r.attach(data_parallel_strategy(p, r, dp, *owned_opts_[i]));
      // ZeRO's optimizer is the replica's cloned over its shards: the whole of it can go.
      if (p.zero > 0) owned_opts_[i]->release_state();
    }
  });
  // Every replica's parameters split alike: replica 0's say how each state tensor splits.
  for (nn::Parameter* q : models_[0]->parameters()) tp_params_[q->name] = q;
  // The host's weights and optimizer state (it may have stepped, or been loaded), in parts.
  scatter_tensor_parallel();
}

GenerateResult Trainer::generate(const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& opt) {
  if (tp_ == 1) {
    gather_model();
    return engine::generate(*models_[0], prompts, opt);
  }
  std::vector<GenerateResult> out(replicas_.size());
  on_all([&](int li, int) {
    const size_t i = static_cast<size_t>(li);
    replicas_[i]->gather_model();  // ZeRO-3 over dp: the values whole until the next step
    GenerateOptions mine = opt;
    if (li != 0) mine.on_token = nullptr;  // every replica samples the same tokens
    out[i] = engine::generate(*models_[i], prompts, mine);
  });
  return out[0];
}

void Trainer::scatter_tensor_parallel() {
  std::map<std::string, Tensor> whole;
  for (auto& t : host_engine_->state_tensors()) whole[t.name] = t.tensor;
  on_all([&](int li, int) {
    const size_t i = static_cast<size_t>(li);
    ScopedDevice on(models_[i]->device());
    const int r = mesh_->coords(mesh_->local_ranks()[i])[comm::kTp];
    // The tensors a load of this replica fills (a sharding strategy's whole ones: it keeps
    // its shards of them in finish_load), each from its part of the host's.
    for (auto& t : replicas_[i]->load_targets()) {
      auto it = whole.find(t.name);
      DT_ASSERT(it != whole.end());
      copy_tensor(nn::take_shard(it->second, tp_spec_of(t.name, t.tensor.shape()), r, tp_), t.tensor);
    }
    replicas_[i]->finish_load();
  });
}

void Trainer::gather_tensor_parallel() {
  // Every replica all-gathers each state tensor's parts (parameters, optimizer state) over
  // its tp group (collective: under mpirun every process calls this; under ZeRO the
  // replica's own state is first gathered over dp); this process's first replica writes
  // them into the host's tensors, which only it touches. Replicas of one tp group are equal
  // across dp, so each process assembles the same whole.
  std::map<std::string, Tensor> whole;
  for (auto& t : host_engine_->state_tensors()) whole[t.name] = t.tensor;
  on_all([&](int li, int) {
    const size_t i = static_cast<size_t>(li);
    comm::Communicator& tp = *tp_comms_[i];
    ScopedDevice on(models_[i]->device());
    for (auto& t : replicas_[i]->state_tensors()) {
      const Tensor& mine = t.tensor;
      const nn::ShardSpec spec = tp_spec_of(t.name, mine.shape());
      auto it = whole.find(t.name);
      DT_ASSERT(it != whole.end());
      if (spec.replicated()) {
        if (li == 0) copy_tensor(mine, it->second);
        continue;
      }
      const int64_t n = mine.numel();
      Tensor parts = Tensor::uninit({tp_ * n}, mine.dtype(), mine.device());
      tp.all_gather(mine.raw(), parts.raw(), n, mine.dtype());
      if (li != 0) continue;
      for (int r = 0; r < tp_; ++r)
        nn::place_shard(parts.slice0(r * n, (r + 1) * n).reshape(mine.shape()), spec, r, tp_, it->second);
    }
  });
  host_engine_->finish_load();
}

}  // namespace dt::engine
