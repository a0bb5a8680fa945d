#include "engine/trainer.h"
#include "engine/pending_save.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/device_scope.h"
#include "core/error.h"
#include "core/options.h"
#include "core/tensor_copy.h"
#include "core/rank_scope.h"
#include "core/thread_pool.h"
#include "core/trace.h"
#include "kernels/ops.h"

namespace dt::engine {

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

Trainer::Trainer(std::shared_ptr<comm::Mesh> mesh, nn::GPT& model, optim::Optimizer& opt, const TrainOptions& o,
                 const ParallelOptions& p)
    : host_(model), host_opt_(opt) {
  p.check();
  layout_ = std::make_unique<parallel::Layout>(mesh, model, p.layout());
  if (!mesh || mesh->world_size() == 1) {  // one device: the plain engine (a shard of one is the whole)
    replicas_.push_back(std::make_unique<TrainEngine>(mesh, model, opt, o));
    return;
  }
  parallel::check_strategies(*layout_, p.strategies(o.micro_batches), opt);
  build_engines(o, p);
}

void Trainer::build_engines(const TrainOptions& o, const ParallelOptions& p) {
  const parallel::Layout& L = *layout_;
  const int local = L.local_parts();
  host_optimizer_on_first_rank();
  if (L.splits_model()) host_engine_ = std::make_unique<TrainEngine>(nullptr, host_, host_opt_, o);
  owned_opts_.resize(static_cast<size_t>(local));
  const parallel::StrategyOptions so = p.strategies(o.micro_batches);
  replicas_.resize(static_cast<size_t>(local));
  // A part's optimizer: the host's for the host itself; where a strategy brings its own
  // (ZeRO's shards) and the parts are whole replicas, the host's is its prototype (no
  // whole copy per replica); otherwise the host's cloned over the part's parameters, its
  // state then cut from the host's below.
  const bool prototype_only = !L.splits_model() && parallel::strategy_owns_optimizer(L, so);
  std::vector<optim::Optimizer*> built_with(static_cast<size_t>(local));
  // Engines and strategies are made on the rank threads: a part's optimizer is its rank's
  // memory, and under mpi creating a communicator is collective.
  L.run([&](int li, int rank) {
    const size_t i = static_cast<size_t>(li);
    ScopedRank owner(rank);
    ScopedDevice on(L.device(li));
    nn::GPT& m = L.part(li);
    optim::Optimizer* opt = &host_opt_;
    if (!L.part_is_host(li) && !prototype_only) opt = (owned_opts_[i] = host_opt_.clone_over(m.parameters())).get();
    built_with[i] = opt;
    TrainEngine& r = *(replicas_[i] = std::make_unique<TrainEngine>(nullptr, m, *opt, o));
    for (auto& s : parallel::make_strategies({L, li, m, r.units(), *opt, so})) r.attach(std::move(s));
  });
  // Each part's state from the host's (it may have stepped, or been loaded): a clone's own
  // optimizer state, a split part's slices of it. ZeRO's shard optimizers cloned it already.
  if (L.splits_model() || !prototype_only) scatter_parts();
  // A split layout's host optimizer is gathered into only when asked (state_tensors): its
  // whole state need not be held beside the parts' slices of it.
  if (L.splits_model()) host_opt_.release_state();
  // An optimizer no engine steps (a strategy replaced it with its shard optimizer): its
  // whole state can go (the host's keeps its step counter).
  for (size_t i = 0; i < built_with.size(); ++i) {
    bool stepped = false;
    for (auto& r : replicas_) stepped = stepped || &r->optimizer() == built_with[i];
    if (!stepped && (built_with[i] != &host_opt_ || i == 0)) built_with[i]->release_state();
  }
}

void Trainer::host_optimizer_on_first_rank() {
  // The host's optimizer state is the first local rank's memory, as its model is.
  for (auto& [name, t] : host_opt_.state()) t.storage()->set_rank(layout_->rank(0));
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
  if (cancel_raised() && layout_->in_process()) throw_cancelled(what, "dt_cancel_request");
}

bool Trainer::cancel_agreed(int local_index, bool stop_here) {
  int32_t stop = stop_here ? 1 : 0;
  layout_->world(local_index).all_reduce(&stop, &stop, 1, DType::I32, kernels::ReduceOp::Max);
  return stop != 0;
}

double Trainer::evaluate(const Tensor& inputs, const Tensor& targets) {
  replicas_[0]->check_batch(inputs, targets, "evaluate");
  cancel_at_entry("evaluate");
  apply_writes();
  if (!replicas_[0]->state_sharded() && !layout_->splits_model()) return replicas_[0]->evaluate(inputs, targets);
  std::vector<double> loss(replicas_.size());
  on_all([&](int li, int) { loss[static_cast<size_t>(li)] = replicas_[static_cast<size_t>(li)]->evaluate(inputs, targets); });
  return loss[0];
}

void Trainer::gather_model() {
  if (layout_->splits_model()) return gather_parts(false);
  if (!replicas_[0]->state_sharded()) return;
  on_all([&](int li, int) { replicas_[static_cast<size_t>(li)]->gather_model(); });
}

StepStats Trainer::train_step(const Tensor& inputs, const Tensor& targets) {
  replicas_[0]->check_batch(inputs, targets, "train_step");
  cancel_at_entry("train_step");
  std::vector<StepStats> stats(replicas_.size());
  finish_save(false);  // commits an asynchronous save whose writes are done (raising its error)
  apply_writes();
  if (replicas_[0]->runs_alone())
    stats[0] = replicas_[0]->train_step(inputs, targets);
  else
    on_all([&](int li, int) { stats[static_cast<size_t>(li)] = replicas_[static_cast<size_t>(li)]->train_step(inputs, targets); });
  // Cancelled by agreement: every rank stopped before its update (a throw on a rank thread
  // would fail the mesh, so the step returns and the error is raised here).
  if (replicas_[0]->cancelled()) throw_cancelled("train_step", "dt_cancel_request");
  host_stale_ = layout_->splits_model();
  return stats[0];
}

std::vector<io::CheckpointTensor> Trainer::state_tensors() {
  apply_writes();
  if (layout_->splits_model()) {
    gather_parts(true);
    std::vector<io::CheckpointTensor> whole = host_engine_->state_tensors();
    host_opt_.release_state();  // the caller's views keep the gathered tensors until it is done
    return whole;
  }
  if (!replicas_[0]->state_sharded()) return replicas_[0]->state_tensors();
  std::vector<std::vector<io::CheckpointTensor>> all(replicas_.size());
  on_all([&](int li, int) { all[static_cast<size_t>(li)] = replicas_[static_cast<size_t>(li)]->state_tensors(); });
  return all[0];
}

void Trainer::save(const std::string& dir, const nlohmann::json& extra, const std::string& stem) {
  apply_writes();
  // On a mesh every rank writes its own state (trainer_checkpoint.cc); one rank alone writes
  // the single-rank layout, which is the same format with one writer.
  if (!layout_->single()) return save_sharded(dir, extra, stem);
  finish_save(true);  // an asynchronous save in flight commits first
  replicas_[0]->save(dir, extra, stem);
}

void Trainer::with_whole_model(const std::function<void(nn::GPT&)>& fn) {
  apply_writes();
  if (!layout_->mesh()) return fn(model(0));
  if (layout_->splits_model()) gather_parts(false);
  else gather_model();  // ZeRO-3: the values whole until the next step; otherwise nothing to do
  nn::GPT& whole = layout_->splits_model() ? host_ : model(0);
  // An error on rank 0 must not leave the others waiting at the barrier: it is raised after.
  std::exception_ptr failed;
  if (layout_->rank(0) == 0) {
    try {
      fn(whole);
    } catch (...) {
      failed = std::current_exception();
    }
  }
  on_all([&](int li, int) { layout_->world(li).barrier(); });
  if (failed) std::rethrow_exception(failed);
}

nlohmann::json Trainer::load(const std::string& dir, const std::string& stem) {
  // Any layout's checkpoint: each rank reads the boxes it holds (trainer_checkpoint.cc).
  finish_save(true);  // an asynchronous save in flight commits first (it may be what is loaded)
  if (!layout_->single()) return load_sharded(dir, stem);
  nlohmann::json extra = replicas_[0]->load(dir, stem);  // validates before it writes
  written_.clear();
  return extra;
}

}  // namespace dt::engine
