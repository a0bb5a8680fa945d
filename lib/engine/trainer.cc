#include "engine/trainer.h"

#include <cstring>

#include "core/error.h"
#include "core/rank_scope.h"
#include "core/thread_pool.h"
#include "core/trace.h"
#include "kernels/ops.h"

namespace dt::engine {

Trainer::Trainer(std::shared_ptr<comm::Mesh> mesh, nn::GPT& model, optim::Optimizer& opt, const TrainOptions& o,
                 const ParallelOptions& p)
    : mesh_(std::move(mesh)) {
  DT_CHECK(p.bucket_bytes >= 1, "bucket_bytes = " + std::to_string(p.bucket_bytes) + "; accepted: >= 1");
  DT_CHECK(p.zero >= 0 && p.zero <= 3, "zero = " + std::to_string(p.zero) + "; accepted: 0 (DDP), 1, 2 or 3 (the ZeRO stage)");
  if (!mesh_ || mesh_->world_size() == 1) {  // one device: the plain engine (a shard of one is the whole)
    models_.push_back(&model);
    replicas_.push_back(std::make_unique<TrainEngine>(mesh_, model, opt, o));
    return;
  }
  for (int a = 0; a < comm::kNumAxes; ++a)
    DT_CHECK(a == comm::kDp || mesh_->axis_size(a) == 1,
             std::string("mesh axis \"") + comm::axis_name(a) + "\" = " + std::to_string(mesh_->axis_size(a)) +
                 "; the engine trains data parallel only for now: accepted, a mesh whose only axis > 1 is \"dp\"");
  dp_ = mesh_->axis_size(comm::kDp);
  zero_ = p.zero;
  const size_t local = mesh_->local_ranks().size();
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
    owned_models_.push_back(std::make_unique<nn::GPT>(model.config()));
    nn::GPT& m = *owned_models_.back();
    const nn::ParamList mine = m.parameters();
    for (size_t k = 0; k < host.size(); ++k) std::memcpy(mine[k]->value.raw(), host[k]->value.raw(), host[k]->value.nbytes());
    models_.push_back(&m);
    if (zero_ > 0) {  // its optimizer will be the host's cloned over its shards
      opts.push_back(&opt);
      continue;
    }
    owned_opts_.push_back(opt.clone_over(mine));
    // The host's optimizer may have stepped already: its state (masters, moments, step) too.
    const optim::NamedTensors from = opt.state(), to = owned_opts_.back()->state();
    DT_ASSERT(from.size() == to.size());
    for (size_t k = 0; k < from.size(); ++k) std::memcpy(to[k].second.raw(), from[k].second.raw(), from[k].second.nbytes());
    opts.push_back(owned_opts_.back().get());
  }
  for (size_t i = 0; i < local; ++i) {
    ScopedRank owner(mesh_->local_ranks()[i]);
    replicas_.push_back(std::make_unique<TrainEngine>(nullptr, *models_[i], *opts[i], o));
  }
  // Communicators are made on the rank threads (under mpi, creating one is collective).
  mesh_->run([&](int li, int rank) {
    TrainEngine& r = *replicas_[static_cast<size_t>(li)];
    if (zero_ > 0)
      r.enable_zero(mesh_->comm(rank, "dp"), zero_, opt);
    else
      r.enable_data_parallel(mesh_->comm(rank, "dp"), p.bucket_bytes);
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

double Trainer::evaluate(const Tensor& inputs, const Tensor& targets) {
  if (zero_ == 0 || dp_ == 1) return replicas_[0]->evaluate(inputs, targets);
  std::vector<double> loss(replicas_.size());
  on_all([&](int li, int) { loss[static_cast<size_t>(li)] = replicas_[static_cast<size_t>(li)]->evaluate(inputs, targets); });
  return loss[0];
}

void Trainer::gather_model() {
  if (zero_ != 3 || dp_ == 1) return;
  on_all([&](int li, int) { replicas_[static_cast<size_t>(li)]->gather_model(); });
}

StepStats Trainer::train_step(const Tensor& inputs, const Tensor& targets) {
  if (replicas_.size() == 1 && dp_ == 1) return replicas_[0]->train_step(inputs, targets);
  std::vector<StepStats> stats(replicas_.size());
  on_all([&](int li, int) { stats[static_cast<size_t>(li)] = replicas_[static_cast<size_t>(li)]->train_step(inputs, targets); });
  return stats[0];
}

std::vector<io::CheckpointTensor> Trainer::state_tensors() {
  if (zero_ == 0 || dp_ == 1) return replicas_[0]->state_tensors();
  std::vector<std::vector<io::CheckpointTensor>> all(replicas_.size());
  on_all([&](int li, int) { all[static_cast<size_t>(li)] = replicas_[static_cast<size_t>(li)]->state_tensors(); });
  return all[0];
}

void Trainer::save(const std::string& dir, const nlohmann::json& extra, const std::string& stem) {
  if (dp_ == 1 || !mesh_) return replicas_[0]->save(dir, extra, stem);
  // Replicas are equal: the world's rank 0 writes; the others wait so that a load after
  // save sees the files. Under ZeRO every replica takes part in gathering the state.
  on_all([&](int li, int rank) {
    if (rank == 0 || zero_ > 0) replicas_[static_cast<size_t>(li)]->save(dir, extra, stem, rank == 0);
    mesh_->comm(rank, "world").barrier();
  });
}

nlohmann::json Trainer::load(const std::string& dir, const std::string& stem) {
  nlohmann::json extra;
  for (auto& r : replicas_) extra = r->load(dir, stem);  // each validates before it writes
  return extra;
}

}  // namespace dt::engine
