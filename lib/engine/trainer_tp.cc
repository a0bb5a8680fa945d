// The Trainer over a mesh with tp > 1 (engine/trainer.h): one tensor-parallel replica per
// local rank, each its part of the host model and optimizer.
#include "core/device_scope.h"
#include "core/error.h"
#include "core/rank_scope.h"
#include "core/tensor_copy.h"
#include "engine/trainer.h"
#include "parallel/ddp_strategy.h"
#include "parallel/tp_strategy.h"

namespace dt::engine {
namespace {

// The split of each of the host optimizer's state tensors: that of the parameter it belongs
// to ("<param>.<suffix>", of the param's shape), or replicated (the step counter).
std::vector<nn::ShardSpec> state_specs(const optim::NamedTensors& state, const nn::ParamList& host,
                                       const nn::ParamList& part) {
  std::vector<nn::ShardSpec> specs(state.size());
  for (size_t s = 0; s < state.size(); ++s)
    for (size_t k = 0; k < host.size(); ++k) {
      const std::string& p = host[k]->name;
      if (state[s].first.size() > p.size() && state[s].first.compare(0, p.size(), p) == 0 &&
          state[s].first[p.size()] == '.' && state[s].second.shape() == host[k]->value.shape()) {
        specs[s] = part[k]->spec;
        break;
      }
    }
  return specs;
}

}  // namespace

void Trainer::build_tensor_parallel(nn::GPT& host, optim::Optimizer& opt, const TrainOptions& o,
                                    const ParallelOptions& p, const std::vector<Device>& devices) {
  tp_ = mesh_->axis_size(comm::kTp);
  if (zero_ > 0)
    fail(DT_ERR_UNSUPPORTED, "zero = " + std::to_string(zero_) + " with tp = " + std::to_string(tp_) +
                                 ": ZeRO inside a tp group is not built yet; accepted with tp > 1: zero = 0 (DDP)");
  const size_t local = mesh_->local_ranks().size();
  if (host.config().dtype == DType::F16)
    fail(DT_ERR_UNSUPPORTED, "an f16 model with tp = " + std::to_string(tp_) +
                                 ": loss scaling under tp is not built yet; accepted with tp > 1: f32, bf16");
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
    replicas_[i] = std::make_unique<TrainEngine>(nullptr, m, *owned_opts_[i], o);
    replicas_[i]->attach(std::make_unique<parallel::TpStrategy>(replicas_[i]->units(), tp, devices[i],
                                                                 p.sequence_parallel));
    if (dp_ > 1) {
      comm::Communicator& dp = on_gpus ? mesh_->device_comm(rank, "dp") : mesh_->comm(rank, "dp");
      replicas_[i]->attach(std::make_unique<parallel::DdpStrategy>(replicas_[i]->units(), dp, p.bucket_bytes));
    }
  });
  // Every replica's parameters split alike, so replica 0's say how each state tensor splits.
  tp_state_specs_ = state_specs(opt.state(), host.parameters(), models_[0]->parameters());
  // The host's weights and optimizer state (it may have stepped, or been loaded), in parts.
  scatter_tensor_parallel();
}

void Trainer::scatter_tensor_parallel() {
  const nn::ParamList whole = host_->parameters();
  const optim::NamedTensors whole_state = host_opt_->state();
  for (size_t i = 0; i < replicas_.size(); ++i) {
    ScopedDevice on(models_[i]->device());
    const int r = mesh_->coords(mesh_->local_ranks()[i])[comm::kTp];
    const nn::ParamList mine = models_[i]->parameters();
    for (size_t k = 0; k < whole.size(); ++k)
      copy_tensor(nn::take_shard(whole[k]->value, mine[k]->spec, r, tp_), mine[k]->value);
    const optim::NamedTensors to = owned_opts_[i]->state();
    DT_ASSERT(to.size() == whole_state.size());
    for (size_t k = 0; k < to.size(); ++k) {
      Tensor dst = to[k].second;  // a handle on the replica's state
      copy_tensor(nn::take_shard(whole_state[k].second, tp_state_specs_[k], r, tp_), dst);
    }
    owned_opts_[i]->after_load();
  }
}

void Trainer::gather_tensor_parallel() {
  // Every replica all-gathers each parameter's and optimizer state tensor's parts over its
  // tp group (collective: under mpirun every process calls this); this process's first
  // replica writes them into the host's tensors, which only it touches. Replicas of one tp
  // group are equal across dp, so each process assembles the same whole.
  const nn::ParamList whole = host_->parameters();
  const optim::NamedTensors whole_state = host_opt_->state();
  on_all([&](int li, int) {
    const size_t i = static_cast<size_t>(li);
    comm::Communicator& tp = *tp_comms_[i];
    ScopedDevice on(models_[i]->device());
    auto assemble = [&](const Tensor& mine, const nn::ShardSpec& spec, Tensor whole_tensor) {
      if (spec.replicated()) {
        if (li == 0) copy_tensor(mine, whole_tensor);
        return;
      }
      const int64_t n = mine.numel();
      Tensor parts = Tensor::uninit({tp_ * n}, mine.dtype(), mine.device());
      tp.all_gather(mine.raw(), parts.raw(), n, mine.dtype());
      if (li != 0) return;
      for (int r = 0; r < tp_; ++r)
        nn::place_shard(parts.slice0(r * n, (r + 1) * n).reshape(mine.shape()), spec, r, tp_, whole_tensor);
    };
    const nn::ParamList part = models_[i]->parameters();
    for (size_t k = 0; k < whole.size(); ++k) assemble(part[k]->value, part[k]->spec, whole[k]->value);
    const optim::NamedTensors from = owned_opts_[i]->state();
    for (size_t k = 0; k < from.size(); ++k) assemble(from[k].second, tp_state_specs_[k], whole_state[k].second);
  });
  host_opt_->after_load();
}

}  // namespace dt::engine
