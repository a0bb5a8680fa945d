// The Trainer over a mesh with tp > 1 or pp > 1 (engine/trainer.h): one replica per local
// rank, each its part of the host model and optimizer (its tp split of its pipeline
// stage), with DDP or ZeRO over dp.
#include <cstdlib>

#include "core/device_scope.h"
#include "core/error.h"
#include "core/rank_scope.h"
#include "core/tensor_copy.h"
#include "engine/plan.h"
#include "engine/trainer.h"
#include "parallel/pipeline_strategy.h"
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

int Trainer::pp_owner(const std::string& name) const {
  if (pp_ == 1) return 0;
  // "blocks.<i>.<...>": block i's stage; the embeddings the first's; the final norm and the
  // head the last's; anything else (the optimizer's step, the loss scaler) every stage's.
  if (name.rfind("blocks.", 0) == 0) {
    const int b = std::atoi(name.c_str() + 7);
    for (size_t vs = 0; vs + 1 < boundaries_.size(); ++vs)
      if (b < boundaries_[vs + 1]) return static_cast<int>(vs) % pp_;
  }
  if (name.rfind("wte.", 0) == 0 || name.rfind("wpe.", 0) == 0) return 0;
  if (name.rfind("ln_f.", 0) == 0 || name.rfind("lm_head.", 0) == 0) return pp_ - 1;
  return -1;
}

void Trainer::build_model_parallel(nn::GPT& host, optim::Optimizer& opt, const TrainOptions& o,
                                   const ParallelOptions& p, const std::vector<Device>& devices) {
  tp_ = mesh_->axis_size(comm::kTp);
  pp_ = mesh_->axis_size(comm::kPp);
  virtual_stages_ = pp_ > 1 ? p.virtual_stages : 1;
  const size_t local = mesh_->local_ranks().size();
  const int L = static_cast<int>(host.config().n_layer);
  std::vector<nn::BlockRange> whole_model = {{0, L}};
  if (pp_ > 1) {
    DT_CHECK(!(dp_ > 1 && p.zero == 3),
             "zero = 3 with pipeline parallelism (pp = " + std::to_string(pp_) + "): ZeRO-3 gathers each unit's "
             "values around every forward and backward, which a pipeline interleaves across micro-batches; "
             "accepted with pp > 1: zero 0 (DDP), 1 or 2");
    boundaries_ = pipeline_boundaries(host.config(), pp_, p.virtual_stages, p.pp_blocks);  // engine/plan.h
  }
  host_ = &host;
  host_opt_ = &opt;
  // The host's engine: checkpoints of a tp run are the host model's, gathered (save) or
  // loaded there first and then cut into parts (load), in the single-rank layout.
  host_engine_ = std::make_unique<TrainEngine>(nullptr, host, opt, o);
  const bool on_gpus = devices[0].type == DeviceType::CUDA;
  // NCCL matches point-to-point messages between two ranks by their order alone (no tags),
  // and a pipeline's activations, gradients and tied-table messages between one pair are
  // issued in orders that only tags reconcile; until that runs on a GPU, refuse it here
  // rather than risk a mismatched or hung transfer.
  if (on_gpus && pp_ > 1)
    fail(DT_ERR_UNSUPPORTED, "pipeline parallelism (pp = " + std::to_string(pp_) + ") on GPUs: NCCL matches "
                             "point-to-point messages by order, not by tag, which the pipeline's streams need; "
                             "accepted: pp = 1 on GPUs, or a pipeline of CPU ranks (local or mpi backend)");
  if (on_gpus) {
    if (tp_ > 1) mesh_->make_device_comms("tp", devices);
    if (dp_ > 1) mesh_->make_device_comms("dp", devices);
  }
  models_.assign(local, nullptr);
  owned_models_.resize(local);
  owned_opts_.resize(local);
  replicas_.resize(local);
  tp_comms_.assign(local, nullptr);
  pp_comms_.assign(local, nullptr);
  // ZeRO-2/3 zero the gradients before each micro-batch's backward and take them after it.
  const bool fresh_grads = dp_ > 1 && p.zero >= 2;
  // Each replica is built on its rank thread, so that its parameters are its rank's memory
  // and device, and its communicators made where they are used.
  mesh_->run([&](int li, int rank) {
    const size_t i = static_cast<size_t>(li);
    ScopedRank owner(rank);
    ScopedDevice on(devices[i]);
    auto group = [&](const char* axis) -> comm::Communicator& {
      return on_gpus ? mesh_->device_comm(rank, axis) : mesh_->comm(rank, axis);
    };
    comm::Communicator* tp = tp_ > 1 ? &group("tp") : nullptr;
    tp_comms_[i] = tp;
    // This rank's chunks: virtual stages pp_rank, pp_rank + pp, ... (pipeline_schedule.h).
    std::vector<nn::BlockRange> chunks = whole_model;
    if (pp_ > 1) {
      pp_comms_[i] = &group("pp");
      chunks.clear();
      for (int c = 0; c < p.virtual_stages; ++c) {
        const size_t vs = static_cast<size_t>(c * pp_ + pp_comms_[i]->rank());
        chunks.push_back({boundaries_[vs], boundaries_[vs + 1]});
      }
    }
    owned_models_[i] = std::make_unique<nn::GPT>(host.config(), nn::TpGroup{tp, p.sequence_parallel}, chunks);
    nn::GPT& m = *owned_models_[i];
    owned_opts_[i] = opt.clone_over(m.parameters());
    models_[i] = &m;
    TrainEngine& r = *(replicas_[i] = std::make_unique<TrainEngine>(nullptr, m, *owned_opts_[i], o));
    // Attach order is hook order: the pipeline adds the tied table's gradient and TP sums
    // the norms' partial gradients before a data-parallel strategy reduces them.
    if (pp_ > 1)
      r.attach(std::make_unique<parallel::PipelineStrategy>(m, *pp_comms_[i], p.pp_schedule, p.virtual_stages,
                                                            o.micro_batches, devices[i], fresh_grads));
    if (tp_ > 1)
      r.attach(std::make_unique<parallel::TpStrategy>(r.units(), *tp, devices[i], p.sequence_parallel, fresh_grads));
    if (dp_ > 1) {
      r.attach(data_parallel_strategy(p, r, group("dp"), *owned_opts_[i]));
      // ZeRO's optimizer is the replica's cloned over its shards: the whole of it can go.
      if (p.zero > 0) owned_opts_[i]->release_state();
    }
  });
  // Every replica's parameters split alike over tp: the local ones say how each of their
  // state tensors splits.
  for (nn::GPT* m : models_)
    for (nn::Parameter* q : m->parameters()) tp_params_[q->name] = q;
  // The host's weights and optimizer state (it may have stepped, or been loaded), in parts.
  scatter_model_parallel();
}

GenerateResult Trainer::generate(const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& opt) {
  // One replica of the whole model: the plain path. Interleaved stages: on the host model,
  // gathered (a prompt would go round the ranks v times, each waiting for it).
  cancel_at_entry("generate");
  // This process's own decision to stop: the flag, or the caller's (a v2 callback's).
  std::function<bool()> local_stop;
  if (cancel_ || opt.should_stop)
    local_stop = [this, &opt] { return cancel_raised() || (opt.should_stop && opt.should_stop()); };
  GenerateOptions here = opt;  // on this thread it decides alone
  here.should_stop = local_stop;
  if (tp_ == 1 && pp_ == 1) {
    gather_model();
    return engine::generate(*models_[0], prompts, here);
  }
  if (virtual_stages_ > 1) {
    gather_model();
    return engine::generate(*host_, prompts, here);
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
    if (local_stop && pp_ == 1) mine.should_stop = [this, li, &local_stop] { return cancel_agreed(li, local_stop()); };
    out[i] = pp_ > 1 ? engine::generate_pipelined(*models_[i], *pp_comms_[i], prompts, mine)
                     : engine::generate(*models_[i], prompts, mine);
  });
  return out[0];
}

std::map<std::string, Tensor> Trainer::host_state() const {
  std::map<std::string, Tensor> whole;
  for (auto& t : host_engine_->state_tensors()) whole[t.name] = t.tensor;
  return whole;
}

void Trainer::scatter_model_parallel() {
  const std::map<std::string, Tensor> whole = host_state();
  on_all([&](int li, int) {
    const size_t i = static_cast<size_t>(li);
    ScopedDevice on(models_[i]->device());
    const int r = tp_comms_[i] ? tp_comms_[i]->rank() : 0;
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

void Trainer::gather_model_parallel() {
  // Every replica all-gathers each state tensor's parts (parameters, optimizer state) over
  // its tp group (under ZeRO the replica's own state is first gathered over dp); over pp,
  // each tensor is then broadcast from the stage that holds it. This process's first
  // replica writes the wholes into the host's tensors, which only it touches. Collective:
  // under mpirun every process calls this; replicas of one tp group are equal across dp,
  // so each process assembles the same whole. (The broadcasts go in name order, the same
  // on every process.)
  std::map<std::string, Tensor> host = host_state();
  on_all([&](int li, int) {
    const size_t i = static_cast<size_t>(li);
    ScopedDevice on(models_[i]->device());
    const Device dev = models_[i]->device();
    std::map<std::string, Tensor> mine;  // this replica's state, whole over tp
    for (auto& t : replicas_[i]->state_tensors()) {
      const nn::ShardSpec spec = tp_spec_of(t.name, t.tensor.shape());
      if (spec.replicated()) {
        mine[t.name] = t.tensor;
        continue;
      }
      const Tensor& part = t.tensor;
      const int64_t n = part.numel();
      Tensor parts = Tensor::uninit({tp_ * n}, part.dtype(), dev);
      tp_comms_[i]->all_gather(part.raw(), parts.raw(), n, part.dtype());
      auto like = host.find(t.name);
      DT_ASSERT(like != host.end());
      Tensor whole = Tensor::uninit(like->second.shape(), part.dtype(), dev);
      for (int r = 0; r < tp_; ++r)
        nn::place_shard(parts.slice0(r * n, (r + 1) * n).reshape(part.shape()), spec, r, tp_, whole);
      mine[t.name] = whole;
    }
    for (auto& [name, dst] : host) {
      const int owner = pp_owner(name);
      auto it = mine.find(name);
      if (pp_ == 1 || owner < 0) {  // held whole here (every stage's step counter is the same)
        DT_ASSERT(it != mine.end());
        if (li == 0) copy_tensor(it->second, dst);
        continue;
      }
      comm::Communicator& pp = *pp_comms_[i];
      Tensor buf = pp.rank() == owner ? it->second : Tensor::uninit(dst.shape(), dst.dtype(), dev);
      DT_ASSERT(pp.rank() != owner || it != mine.end());
      pp.broadcast(buf.raw(), buf.raw(), buf.numel(), buf.dtype(), owner);
      if (li == 0) copy_tensor(buf, dst);
    }
  });
  host_engine_->finish_load();
}

}  // namespace dt::engine
