#include "engine/trainer.h"

#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"
#include "core/trace.h"
#include "kernels/ops.h"

namespace dt::engine {

Trainer::Trainer(std::shared_ptr<comm::Mesh> mesh, nn::GPT& model, optim::Optimizer& opt, const TrainOptions& o,
                 const ParallelOptions& p)
    : mesh_(std::move(mesh)) {
  DT_CHECK(p.bucket_bytes >= 1, "bucket_bytes = " + std::to_string(p.bucket_bytes) + "; accepted: >= 1");
  if (!mesh_ || mesh_->world_size() == 1) {  // one device: the plain engine
    models_.push_back(&model);
    replicas_.push_back(std::make_unique<TrainEngine>(mesh_, model, opt, o));
    return;
  }
  for (int a = 0; a < comm::kNumAxes; ++a)
    DT_CHECK(a == comm::kDp || mesh_->axis_size(a) == 1,
             std::string("mesh axis \"") + comm::axis_name(a) + "\" = " + std::to_string(mesh_->axis_size(a)) +
                 "; the engine trains data parallel only for now: accepted, a mesh whose only axis > 1 is \"dp\"");
  dp_ = mesh_->axis_size(comm::kDp);
  const size_t local = mesh_->local_ranks().size();
  models_.push_back(&model);
  std::vector<optim::Optimizer*> opts = {&opt};
  const nn::ParamList host = model.parameters();
  for (size_t i = 1; i < local; ++i) {
    owned_models_.push_back(std::make_unique<nn::GPT>(model.config()));
    nn::GPT& m = *owned_models_.back();
    const nn::ParamList mine = m.parameters();
    for (size_t k = 0; k < host.size(); ++k) std::memcpy(mine[k]->value.raw(), host[k]->value.raw(), host[k]->value.nbytes());
    owned_opts_.push_back(opt.clone_over(mine));
    // The host's optimizer may have stepped already: its state (masters, moments, step) too.
    const optim::NamedTensors from = opt.state(), to = owned_opts_.back()->state();
    DT_ASSERT(from.size() == to.size());
    for (size_t k = 0; k < from.size(); ++k) std::memcpy(to[k].second.raw(), from[k].second.raw(), from[k].second.nbytes());
    models_.push_back(&m);
    opts.push_back(owned_opts_.back().get());
  }
  for (size_t i = 0; i < local; ++i) replicas_.push_back(std::make_unique<TrainEngine>(nullptr, *models_[i], *opts[i], o));
  // Communicators are made on the rank threads (under mpi, creating one is collective).
  mesh_->run([&](int li, int rank) { replicas_[static_cast<size_t>(li)]->enable_data_parallel(mesh_->comm(rank, "dp"), p.bucket_bytes); });
}

StepStats Trainer::train_step(const Tensor& inputs, const Tensor& targets) {
  if (replicas_.size() == 1 && dp_ == 1) return replicas_[0]->train_step(inputs, targets);
  std::vector<StepStats> stats(replicas_.size());
  const bool shared_cores = replicas_.size() > 1;
  mesh_->run([&](int li, int rank) {
    // Ranks of one process share its cores: each runs its kernels on its own thread rather
    // than queueing on the one pool.
    TraceRank track(rank);
    std::unique_ptr<ScopedSerialKernels> serial;
    if (shared_cores) serial = std::make_unique<ScopedSerialKernels>();
    stats[static_cast<size_t>(li)] = replicas_[static_cast<size_t>(li)]->train_step(inputs, targets);
  });
  return stats[0];
}

void Trainer::save(const std::string& dir, const nlohmann::json& extra, const std::string& stem) {
  if (dp_ == 1 || !mesh_) return replicas_[0]->save(dir, extra, stem);
  // Replicas are equal: the world's rank 0 writes; the others wait so that a load after
  // save sees the files.
  mesh_->run([&](int li, int rank) {
    if (rank == 0) replicas_[static_cast<size_t>(li)]->save(dir, extra, stem);
    mesh_->comm(rank, "world").barrier();
  });
}

nlohmann::json Trainer::load(const std::string& dir, const std::string& stem) {
  nlohmann::json extra;
  for (auto& r : replicas_) extra = r->load(dir, stem);  // each validates before it writes
  return extra;
}

}  // namespace dt::engine
