#include "engine/trainer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/device_scope.h"
#include "core/error.h"
#include "core/gpu_runtime.h"
#include "core/options.h"
#include "core/tensor_copy.h"
#include "core/rank_scope.h"
#include "core/thread_pool.h"
#include "core/trace.h"
#include "kernels/ops.h"
#include "parallel/ddp_strategy.h"
#include "parallel/zero_strategy.h"

namespace dt::engine {
namespace {

// Local rank i's device: the CPU for a CPU model; for a GPU model on cuda:d, cuda:(d + i),
// one GPU per rank (NCCL cannot put two ranks of one communicator on one GPU).
std::vector<Device> rank_devices(Device model_device, size_t local) {
  if (model_device.type == DeviceType::CPU) return std::vector<Device>(local, model_device);
  const int n = gpu::device_count(), need = model_device.index + static_cast<int>(local);
  if (need > n)
    fail(DT_ERR_UNSUPPORTED, "data parallel over GPUs: " + std::to_string(local) + " local ranks from " +
                                 model_device.str() + " need cuda:" + std::to_string(model_device.index) + " to cuda:" +
                                 std::to_string(need - 1) + ", one GPU per rank; CUDA devices found: " +
                                 std::to_string(n));
  std::vector<Device> out;
  for (size_t i = 0; i < local; ++i) out.push_back(Device{DeviceType::CUDA, model_device.index + static_cast<int>(i)});
  return out;
}

// The strategies ParallelOptions configures, each with the mesh axis it divides the work over.
std::vector<std::pair<std::string, int>> strategies_covering(const ParallelOptions& p) {
  return {{p.zero > 0 ? "zero" + std::to_string(p.zero) : "ddp", comm::kDp}, {"tp", comm::kTp}, {"pp", comm::kPp}};
}

}  // namespace

std::vector<int> parse_block_counts(const std::string& text, const std::string& what) {
  DT_CHECK(!text.empty(), what + " = \"\": an empty list; accepted: comma-separated integers >= 1, one per stage "
                                 "(e.g. \"3,1\"), or leave the key out for balanced stages");
  const std::vector<int64_t> counts = parse_int_list(text, 1, 1000000, [&](const std::string& item) {
    return what + " = \"" + text + "\": item \"" + item + "\" is not a block count; accepted: comma-separated "
           "integers >= 1, one per stage (e.g. \"3,1\")";
  });
  return std::vector<int>(counts.begin(), counts.end());
}

void ParallelOptions::check() const {
  DT_CHECK(zero >= 0 && zero <= 3,
           "option \"zero\" = " + std::to_string(zero) + "; accepted: 0 (DDP, the default), 1, 2 or 3 (the ZeRO stage)");
  DT_CHECK(bucket_bytes >= 1,
           "option \"bucket_bytes\" = " + std::to_string(bucket_bytes) + "; accepted: >= 1 (default 25 MiB)");
  const std::vector<std::string>& names = parallel::pipe_schedule_names();
  std::string list;
  for (const std::string& n : names)
    if (n != "forward") list += (list.empty() ? "" : ", ") + n;
  DT_CHECK(pp_schedule != "forward" && std::find(names.begin(), names.end(), pp_schedule) != names.end(),
           "option \"pp_schedule\" = \"" + pp_schedule + "\"; accepted: " + list);
  DT_CHECK(virtual_stages >= 1 && virtual_stages <= 64,
           "option \"virtual_stages\" = " + std::to_string(virtual_stages) + "; accepted: 1 to 64 (>= 2 for interleaved)");
}

std::unique_ptr<parallel::Strategy> Trainer::data_parallel_strategy(const ParallelOptions& p, const TrainEngine& engine,
                                                                   comm::Communicator& dp,
                                                                   const optim::Optimizer& prototype) {
  if (p.zero > 0) return std::make_unique<parallel::ZeroStrategy>(engine.units(), dp, p.zero, prototype);
  return std::make_unique<parallel::DdpStrategy>(engine.units(), dp, p.bucket_bytes);
}

Trainer::Trainer(std::shared_ptr<comm::Mesh> mesh, nn::GPT& model, optim::Optimizer& opt, const TrainOptions& o,
                 const ParallelOptions& p)
    : mesh_(std::move(mesh)) {
  p.check();
  const int tp = mesh_ ? mesh_->axis_size(comm::kTp) : 1;
  // Pipeline placement without a pipeline would be ignored: refused, as dt_plan_json does.
  if (const int pp = mesh_ ? mesh_->axis_size(comm::kPp) : 1; pp < 2) {
    DT_CHECK(p.virtual_stages == 1, "option \"virtual_stages\" = " + std::to_string(p.virtual_stages) +
                                        " splits pipeline ranks into chunks; the mesh's pp axis is " + std::to_string(pp) +
                                        "; accepted: with a pp axis >= 2, or leave it out");
    DT_CHECK(p.pp_blocks.empty(), "option \"pp_blocks\" places blocks on pipeline stages; the mesh's pp axis is " +
                                      std::to_string(pp) + "; accepted: with a pp axis >= 2, or leave it out");
  }
  DT_CHECK(!p.sequence_parallel || tp > 1,
           "sequence_parallel needs tensor parallelism: the mesh's tp axis is " + std::to_string(tp) +
               "; accepted: sequence_parallel with a tp axis > 1, or without it");
  if (!mesh_ || mesh_->world_size() == 1) {  // one device: the plain engine (a shard of one is the whole)
    models_.push_back(&model);
    replicas_.push_back(std::make_unique<TrainEngine>(mesh_, model, opt, o));
    return;
  }
  // Every axis of more than one rank must be some configured strategy's.
  const std::vector<std::pair<std::string, int>> covered = strategies_covering(p);
  for (int a = 0; a < comm::kNumAxes; ++a) {
    if (mesh_->axis_size(a) == 1) continue;
    bool ok = false;
    std::string have;
    for (auto& [name, axis] : covered) {
      ok = ok || axis == a;
      have += (have.empty() ? "" : ", ") + name + " on " + comm::axis_name(axis);
    }
    DT_CHECK(ok, std::string("mesh axis \"") + comm::axis_name(a) + "\" = " + std::to_string(mesh_->axis_size(a)) +
                     ": no configured strategy divides the work over it (configured: " + have + ")");
  }
  dp_ = mesh_->axis_size(comm::kDp);
  zero_ = p.zero;
  const size_t local = mesh_->local_ranks().size();
  const std::vector<Device> devices = rank_devices(model.device(), local);
  if (mesh_->axis_size(comm::kTp) > 1 || mesh_->axis_size(comm::kPp) > 1) {  // trainer_model_parallel.cc
    build_model_parallel(model, opt, o, p, devices);
    return;
  }
  if (devices[0].type == DeviceType::CUDA && zero_ > 0 && opt.offloaded())
    fail(DT_ERR_UNSUPPORTED, "zero = " + std::to_string(zero_) + " with an offloaded optimizer on GPUs: ZeRO shards "
                             "the state over NCCL, which needs it on the GPU; use zero = 0 (DDP) with offload, or "
                             "no offload");
  models_.push_back(&model);
  std::vector<optim::Optimizer*> opts = {&opt};
  const nn::ParamList host = model.parameters();
  // The host's model and optimizer are the first local rank's memory.
  const int first = mesh_->local_ranks()[0];
  for (nn::Parameter* q : host)
    for (Tensor* t : {&q->value, &q->grad})
      if (t->defined()) t->storage()->set_rank(first);
  for (auto& [name, t] : opt.state()) t.storage()->set_rank(first);
  for (size_t i = 1; i < local; ++i) {
    ScopedRank owner(mesh_->local_ranks()[i]);
    ScopedDevice on(devices[i]);  // a GPU model's replica i lives on the next GPU
    owned_models_.push_back(std::make_unique<nn::GPT>(model.config()));
    nn::GPT& m = *owned_models_.back();
    const nn::ParamList mine = m.parameters();
    for (size_t k = 0; k < host.size(); ++k) copy_tensor(host[k]->value, mine[k]->value);
    models_.push_back(&m);
    if (zero_ > 0) {  // its optimizer will be the host's cloned over its shards
      opts.push_back(&opt);
      continue;
    }
    owned_opts_.push_back(opt.clone_over(mine));
    // The host's optimizer may have stepped already: its state (masters, moments, step) too.
    const optim::NamedTensors from = opt.state(), to = owned_opts_.back()->state();
    DT_ASSERT(from.size() == to.size());
    for (size_t k = 0; k < from.size(); ++k) {
      Tensor dst = to[k].second;  // a handle on the replica's state
      copy_tensor(from[k].second, dst);
    }
    opts.push_back(owned_opts_.back().get());
  }
  for (size_t i = 0; i < local; ++i) {
    ScopedRank owner(mesh_->local_ranks()[i]);
    replicas_.push_back(std::make_unique<TrainEngine>(nullptr, *models_[i], *opts[i], o));
  }
  // A GPU model's gradients and shards move between GPUs: the mesh's device communicators.
  const bool on_gpus = devices[0].type == DeviceType::CUDA;
  if (on_gpus) mesh_->make_device_comms("dp", devices);
  // Strategies attach on the rank threads (under mpi, creating a communicator is collective).
  mesh_->run([&](int li, int rank) {
    TrainEngine& r = *replicas_[static_cast<size_t>(li)];
    comm::Communicator& dp = on_gpus ? mesh_->device_comm(rank, "dp") : mesh_->comm(rank, "dp");
    r.attach(data_parallel_strategy(p, r, dp, opt));
  });
  // Every replica has its slice of the host optimizer's state: the whole of it can go.
  if (zero_ > 0) opt.release_state();
}

void Trainer::on_all(const std::function<void(int, int)>& fn) {
  const bool shared_cores = replicas_.size() > 1;
  mesh_->run([&](int li, int rank) {
    // Ranks of one process share its cores: each runs its kernels on its own thread rather
    // than queueing on the one pool.
    std::unique_ptr<ScopedSerialKernels> serial;
    if (shared_cores) serial = std::make_unique<ScopedSerialKernels>();
    fn(li, rank);
  });
}

void Trainer::set_cancel(std::shared_ptr<CancelFlag> flag) {
  cancel_ = std::move(flag);
  const bool alone = replicas_.size() == 1 && replicas_[0]->runs_alone();
  for (size_t i = 0; i < replicas_.size(); ++i) {
    std::function<bool()> local, agreed;
    if (cancel_ && alone) local = [this] { return cancel_raised(); };
    if (cancel_ && !alone) agreed = [this, i] { return cancel_agreed(static_cast<int>(i), cancel_raised()); };
    replicas_[i]->set_cancel(std::move(local), std::move(agreed));
  }
}

void Trainer::cancel_at_entry(const char* what) const {
  if (cancel_raised() && in_process()) throw_cancelled(what, "dt_cancel_request");
}

bool Trainer::cancel_agreed(int local_index, bool stop_here) {
  int32_t stop = stop_here ? 1 : 0;
  world_comm(local_index).all_reduce(&stop, &stop, 1, DType::I32, kernels::ReduceOp::Max);
  return stop != 0;
}

double Trainer::evaluate(const Tensor& inputs, const Tensor& targets) {
  replicas_[0]->check_batch(inputs, targets, "evaluate");
  cancel_at_entry("evaluate");
  if (!replicas_[0]->state_sharded() && !model_parallel()) return replicas_[0]->evaluate(inputs, targets);
  std::vector<double> loss(replicas_.size());
  on_all([&](int li, int) { loss[static_cast<size_t>(li)] = replicas_[static_cast<size_t>(li)]->evaluate(inputs, targets); });
  return loss[0];
}

void Trainer::gather_model() {
  if (model_parallel()) return gather_model_parallel();
  if (!replicas_[0]->state_sharded()) return;
  on_all([&](int li, int) { replicas_[static_cast<size_t>(li)]->gather_model(); });
}

StepStats Trainer::train_step(const Tensor& inputs, const Tensor& targets) {
  replicas_[0]->check_batch(inputs, targets, "train_step");
  cancel_at_entry("train_step");
  std::vector<StepStats> stats(replicas_.size());
  if (replicas_.size() == 1 && dp_ == 1)
    stats[0] = replicas_[0]->train_step(inputs, targets);
  else
    on_all([&](int li, int) { stats[static_cast<size_t>(li)] = replicas_[static_cast<size_t>(li)]->train_step(inputs, targets); });
  // Cancelled by agreement: every rank stopped before its update (a throw on a rank thread
  // would fail the mesh, so the step returns and the error is raised here).
  if (replicas_[0]->cancelled()) throw_cancelled("train_step", "dt_cancel_request");
  return stats[0];
}

std::vector<io::CheckpointTensor> Trainer::state_tensors() {
  if (model_parallel()) {
    gather_model_parallel();
    return host_engine_->state_tensors();
  }
  if (!replicas_[0]->state_sharded()) return replicas_[0]->state_tensors();
  std::vector<std::vector<io::CheckpointTensor>> all(replicas_.size());
  on_all([&](int li, int) { all[static_cast<size_t>(li)] = replicas_[static_cast<size_t>(li)]->state_tensors(); });
  return all[0];
}

void Trainer::save(const std::string& dir, const nlohmann::json& extra, const std::string& stem) {
  if (model_parallel()) {  // the gathered whole, from the host of the world's rank 0
    gather_model_parallel();
    if (mesh_->local_ranks()[0] == 0) host_engine_->save(dir, extra, stem);
    on_all([&](int, int rank) { mesh_->comm(rank, "world").barrier(); });  // a load after sees the files
    return;
  }
  if (dp_ == 1 || !mesh_) return replicas_[0]->save(dir, extra, stem);
  // Replicas are equal: the world's rank 0 writes; the others wait so that a load after
  // save sees the files. With sharded state (ZeRO) every replica takes part in gathering it.
  const bool sharded = replicas_[0]->state_sharded();
  on_all([&](int li, int rank) {
    if (rank == 0 || sharded) replicas_[static_cast<size_t>(li)]->save(dir, extra, stem, rank == 0);
    mesh_->comm(rank, "world").barrier();
  });
}

void Trainer::with_whole_model(const std::function<void(nn::GPT&)>& fn) {
  if (!mesh_) return fn(model(0));
  if (model_parallel()) gather_model_parallel();
  else gather_model();  // ZeRO-3: the values whole until the next step; otherwise nothing to do
  nn::GPT& whole = model_parallel() ? *host_ : model(0);
  // An error on rank 0 must not leave the others waiting at the barrier: it is raised after.
  std::exception_ptr failed;
  if (mesh_->local_ranks()[0] == 0) {
    try {
      fn(whole);
    } catch (...) {
      failed = std::current_exception();
    }
  }
  on_all([&](int, int rank) { mesh_->comm(rank, "world").barrier(); });
  if (failed) std::rethrow_exception(failed);
}

nlohmann::json Trainer::load(const std::string& dir, const std::string& stem) {
  if (model_parallel()) {  // into the host (which checks everything before it writes), then in parts
    nlohmann::json extra = host_engine_->load(dir, stem);
    scatter_model_parallel();
    return extra;
  }
  nlohmann::json extra;
  for (auto& r : replicas_) extra = r->load(dir, stem);  // each validates before it writes
  return extra;
}

}  // namespace dt::engine
