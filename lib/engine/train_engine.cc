#include "engine/train_engine.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "core/error.h"
#include "core/trace.h"
#include "io/model_config.h"
#include "kernels/ops.h"
#include "nn/loss.h"
#include "nn/tensor_parallel.h"
#include "optim/clip.h"

namespace dt::engine {

nlohmann::json moe_json(const nn::MoEStats& m) {
  nlohmann::json j = {{"tokens_per_expert", m.tokens}, {"dropped", m.dropped}, {"aux_loss", m.aux_loss},
                      {"z_loss", m.z_loss}};
  const size_t E = m.tokens.size();
  if (E > 0 && !m.block_tokens.empty()) {  // per block: [[expert 0, expert 1, ...], ...]
    nlohmann::json blocks = nlohmann::json::array();
    for (size_t b = 0; b + E <= m.block_tokens.size(); b += E)
      blocks.push_back(std::vector<int64_t>(m.block_tokens.begin() + static_cast<std::ptrdiff_t>(b),
                                            m.block_tokens.begin() + static_cast<std::ptrdiff_t>(b + E)));
    j["tokens_per_block_expert"] = blocks;
  }
  if (m.exchanged_bytes > 0)
    j.update({{"all_to_all_bytes", m.exchanged_bytes}, {"all_to_all_bytes_uniform", m.exchanged_bytes_uniform}});
  return j;
}

std::string metrics_json(const StepStats& s) {
  nlohmann::json j = {{"step", s.step},       {"loss", s.loss},       {"grad_norm", s.grad_norm},
                      {"lr", s.lr},           {"tokens", s.tokens},   {"seconds", s.seconds},
                      {"tokens_per_s", s.tokens_per_s}, {"loss_scale", s.loss_scale}, {"skipped", s.skipped}};
  const parallel::PipeStats& p = s.pipeline;
  if (!p.stage_busy_s.empty())  // a pipeline: what each stage computed, and the bubble
    j["pipeline"] = {{"bubble_fraction", p.bubble_fraction}, {"stage_busy_s", p.stage_busy_s},
                     {"stage_activation_peak", p.stage_activation_peak}, {"wall_s", p.wall_s}};
  if (!s.moe.tokens.empty()) j["moe"] = moe_json(s.moe);
  return j.dump();
}

void TrainOptions::check() const {
  DT_CHECK(micro_batches >= 1, "option \"micro_batches\" = " + std::to_string(micro_batches) + "; accepted: >= 1");
  DT_CHECK(std::isfinite(max_grad_norm),
           "option \"max_grad_norm\" is not finite; accepted: <= 0 (no clipping) or > 0");
}

TrainEngine::TrainEngine(std::shared_ptr<comm::Mesh> mesh, nn::GPT& model, optim::Optimizer& opt,
                         const TrainOptions& o)
    : mesh_(std::move(mesh)), model_(model), opt_(&opt), opt_cfg_(o) {
  DT_CHECK(!mesh_ || mesh_->world_size() == 1,
           "TrainEngine: mesh world size = " + std::to_string(mesh_ ? mesh_->world_size() : 1) +
               "; accepted for now: 1 (data parallelism comes with the DDP engine)");
  o.check();
  // Loss-scaler options are checked for every model, so a bad one never waits for f16.
  optim::DynamicLossScaler checked(o.loss_scaler);
  if (model_.config().dtype == DType::F16) {
    scaler_ = std::make_unique<optim::DynamicLossScaler>(checked);
    scaler_scale_ = Tensor::zeros({1}, DType::F32, Device::cpu(), MemTag::Optimizer);
    scaler_good_ = Tensor::zeros({1}, DType::I64, Device::cpu(), MemTag::Optimizer);
    save_scaler_state();
  }
  // The units strategies see: everything outside the blocks, then each block.
  std::set<const nn::Parameter*> in_blocks;
  // A pipeline stage's are its own blocks' (named by their whole-model index).
  units_.params.emplace_back();
  units_.names.push_back("embed_head");
  block_unit_.assign(static_cast<size_t>(model_.config().n_layer), -1);
  int local = 0;
  for (const nn::BlockRange& r : model_.chunks())
    for (int i = r.begin; i < r.end; ++i, ++local) {
      block_unit_[static_cast<size_t>(i)] = static_cast<int>(units_.params.size());
      units_.params.push_back(model_.blocks()[static_cast<size_t>(local)]->parameters());
      units_.names.push_back("block." + std::to_string(i));
      for (nn::Parameter* p : units_.params.back()) in_blocks.insert(p);
    }
  for (nn::Parameter* p : model_.parameters())
    if (!in_blocks.count(p)) units_.params[0].push_back(p);
}

void TrainEngine::attach(std::unique_ptr<parallel::Strategy> s) {
  DT_CHECK(s != nullptr, "TrainEngine::attach: a strategy is required");
  for (auto& have : strategies_)
    DT_CHECK(have->name() != s->name(), "strategy \"" + s->name() + "\" is attached already");
  if (comm::Communicator* g = s->batch_group()) {
    DT_CHECK(!batch_, "strategy \"" + s->name() + "\" splits the batch, and an attached one does already");
    batch_ = g;
  }
  if (s->shards_state()) {
    DT_CHECK(!sharded_state_, "strategy \"" + s->name() + "\" shards the state, and \"" + sharded_state_->name() +
                                  "\" does already");
    sharded_state_ = s.get();
  }
  if (optim::Optimizer* o = s->optimizer()) opt_ = o;
  owned_grads_ = owned_grads_ || s->owns_grads();
  strategies_.push_back(std::move(s));
}

void TrainEngine::gather_model() {
  run([&] {
    for (auto& s : strategies_) s->gather_model();
  });
}

void TrainEngine::clear_grads() {
  if (!owned_grads_) opt_->zero_grad();
}

nn::MoEStats TrainEngine::sum_routing() {
  nn::MoEStats m = routed_;
  if (!model_.config().moe()) return m;
  // Summed as the loss is: over the strategies' groups (stages hold disjoint blocks), then
  // the batch (ranks hold disjoint rows): one collective per group, once per step.
  m.tokens.resize(static_cast<size_t>(model_.config().n_experts), 0);
  std::vector<double> v(m.tokens.begin(), m.tokens.end());
  v.push_back(static_cast<double>(m.dropped));
  v.push_back(m.aux_loss);
  v.push_back(m.z_loss);
  v.push_back(m.exchanged_bytes);
  v.push_back(m.exchanged_bytes_uniform);
  m.block_tokens.resize(static_cast<size_t>(model_.config().n_layer * model_.config().n_experts), 0);
  v.insert(v.end(), m.block_tokens.begin(), m.block_tokens.end());
  for (auto& s : strategies_) s->sum_loss(v.data(), v.size()), s->sum_over_split_tokens(v.data(), v.size());
  if (batch_) parallel::exact_sum(*batch_, v.data(), v.size(), model_.device());
  const size_t E = m.tokens.size();
  for (size_t e = 0; e < E; ++e) m.tokens[e] = static_cast<int64_t>(std::llround(v[e]));
  m.dropped = static_cast<int64_t>(std::llround(v[E]));
  m.aux_loss = v[E + 1];
  m.z_loss = v[E + 2];
  m.exchanged_bytes = v[E + 3];
  m.exchanged_bytes_uniform = v[E + 4];
  for (size_t i = 0; i < m.block_tokens.size(); ++i) m.block_tokens[i] = static_cast<int64_t>(std::llround(v[E + 5 + i]));
  return m;
}

double TrainEngine::batch_sum(double x) const {
  return batch_ ? parallel::exact_sum(*batch_, x, model_.device()) : x;
}

void TrainEngine::set_cancel(std::function<bool()> local, std::function<bool()> agreed) {
  cancel_local_ = std::move(local);
  cancel_agreed_ = std::move(agreed);
}

void TrainEngine::cancel_point(const char* what) {
  if (cancel_local_ && runs_alone() && cancel_local_()) throw_cancelled(what, "dt_cancel_request");
}

void TrainEngine::run(const std::function<void()>& fn) {
  // The step runs on the mesh's rank thread, where a data-parallel engine will run one
  // replica per local rank; without a mesh, on the caller's thread.
  if (mesh_)
    mesh_->run([&](int, int) { fn(); });
  else
    fn();
}

void TrainEngine::check_batch(const Tensor& in, const Tensor& tg, const char* what) const {
  const std::string w(what);
  DT_CHECK(in.defined() && in.dtype() == DType::I32 && in.ndim() == 2,
           w + ": inputs must be i32 [B, T], got " + (in.defined() ? shape_str(in.shape()) : "undefined"));
  DT_CHECK(tg.defined() && tg.dtype() == DType::I32 && tg.shape() == in.shape(),
           w + ": targets must be i32 of the inputs' shape " + shape_str(in.shape()));
  const int64_t B = in.dim(0), M = opt_cfg_.micro_batches;
  DT_CHECK(B > 0 && in.dim(1) > 0, w + ": inputs is an empty batch " + shape_str(in.shape()) + "; need B, T >= 1");
  DT_CHECK(B % M == 0, w + ": batch B = " + std::to_string(B) + " is not divisible by micro_batches = " +
                           std::to_string(M));
  // A step splits the batch over the batch group (dp) too; every strategy then checks the
  // micro-batch it will see.
  const bool step = w == "train_step";
  const int64_t dp = step && batch_ ? batch_->size() : 1;
  DT_CHECK(B % (dp * M) == 0, w + ": global batch B = " + std::to_string(B) + " is not divisible by dp (" +
                                  std::to_string(dp) + ") x micro_batches (" + std::to_string(M) + ")");
  for (auto& s : strategies_) s->check_micro_batch(w, B / (dp * M), in.dim(1));
  const int64_t V = model_.config().vocab_size;
  const int32_t *pi = in.data<int32_t>(), *pt = tg.data<int32_t>();
  for (int64_t i = 0; i < in.numel(); ++i) {
    DT_CHECK(pi[i] >= 0 && pi[i] < V, w + ": inputs holds token id " + std::to_string(pi[i]) + " at index " +
                                          std::to_string(i) + ", outside [0, vocab_size = " + std::to_string(V) + ")");
    DT_CHECK((pt[i] >= 0 && pt[i] < V) || pt[i] == opt_cfg_.ignore_index,
             w + ": targets holds " + std::to_string(pt[i]) + " at index " + std::to_string(i) +
                 ", neither in [0, vocab_size = " + std::to_string(V) + ") nor ignore_index = " +
                 std::to_string(opt_cfg_.ignore_index));
  }
}

int64_t TrainEngine::count_targets(const Tensor& tg) const {
  int64_t n = 0;
  const int32_t* p = tg.data<int32_t>();
  for (int64_t i = 0; i < tg.numel(); ++i) n += p[i] != opt_cfg_.ignore_index;
  return n;
}

StepStats TrainEngine::train_step(const Tensor& inputs, const Tensor& targets) {
  check_batch(inputs, targets, "train_step");
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t dp = batch_ ? batch_->size() : 1, M = opt_cfg_.micro_batches;
  const int64_t local = inputs.dim(0) / dp, mb = local / M, r0 = batch_ ? batch_->rank() * local : 0;
  StepStats st;
  cancelled_ = false;
  call_ = "train_step";
  auto body = [&] {
    clear_grads();
    for (auto& s : strategies_) s->begin_step();
    const float loss_scale = scaler_ ? scaler_->scale() : 1.0f;
    // The global batch's target count (every rank sees the whole batch, so no collective).
    const int64_t total = count_targets(targets);
    std::vector<MicroBatch> mbs(static_cast<size_t>(M));
    for (int64_t m = 0; m < M; ++m) {
      MicroBatch& b = mbs[static_cast<size_t>(m)];
      b.in = inputs.slice0(r0 + m * mb, r0 + (m + 1) * mb);
      b.tg = targets.slice0(r0 + m * mb, r0 + (m + 1) * mb);
      for (auto& s : strategies_) s->select_tokens(b.in, b.tg);
      // d(batch mean)/d(micro mean) = n / total; a micro-batch with nothing to learn adds 0.
      const int64_t n = count_targets(b.tg);
      b.share = total > 0 ? static_cast<double>(n) / static_cast<double>(total) : 0.0;
      b.grad_scale = static_cast<float>(b.share) * loss_scale;
      for (auto& s : strategies_) b.aux_share *= static_cast<float>(s->rows_share(b.tg, opt_cfg_.ignore_index));
    }
    double loss_sum = run_actions(actions_for(M, false), mbs, false, st.pipeline);
    for (auto& s : strategies_) s->finish_grads();
    for (auto& s : strategies_) s->sum_loss(&loss_sum, 1);
    loss_sum = batch_sum(loss_sum);
    st.moe = sum_routing();
    st.loss = total > 0 ? loss_sum / static_cast<double>(total) : 0.0;
    cancel_point("train_step");
    if (cancel_agreed_ && cancel_agreed_()) {  // every rank stops here, none updates
      cancelled_ = true;
      clear_grads();  // a strategy that keeps the grads zeroes them at the next step
      return;
    }
    finish_step(st, loss_scale);
  };
  try {
    run(body);
  } catch (const Error& e) {
    if (e.code() == DT_ERR_CANCELLED) clear_grads();  // stopped between units: nothing is left
    throw;
  }
  if (cancelled_) return st;
  st.step = opt_->steps();
  st.tokens = inputs.numel();
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  st.tokens_per_s = st.seconds > 0 ? static_cast<double>(st.tokens) / st.seconds : 0.0;
  return st;
}

void TrainEngine::finish_step(StepStats& st, float loss_scale) {
  wait_before_update();  // an asynchronous save's copy of the state is complete first
  TraceSpan span("compute", "optimizer step");
  const nn::ParamList& ps = opt_->params();
  // The schedule is a function of the update count, which checkpoints restore.
  st.lr = opt_cfg_.schedule.lr(opt_->steps());
  st.loss_scale = loss_scale;
  // Each strategy sums what its ranks hold of the squared norm (ZeRO: the shards over dp;
  // TP: the split parts over tp); every rank then has the same norm and takes the same
  // clip and skip decisions.
  auto grad_norm = [&] {
    parallel::SquaredNorm sq;
    bool local = false;
    for (auto& s : strategies_) local = local || s->local_squared_norm(sq);
    if (!local)
      for (const nn::Parameter* p : ps) nn::add_grad_squares(*p, p->grad, 0, sq.split, sq.replicated);
    for (auto& s : strategies_) s->sum_squared_norm(sq);
    return std::sqrt(sq.total());
  };
  if (!scaler_) {
    st.grad_norm = grad_norm();
    const float clip = opt_cfg_.max_grad_norm > 0 ? optim::clip_coefficient(st.grad_norm, opt_cfg_.max_grad_norm) : 1.0f;
    opt_->set_lr(st.lr);
    opt_->step(clip);
    for (auto& s : strategies_) s->after_update();
    return;
  }
  // One pass: the scaled norm is non-finite exactly when some gradient overflowed.
  const double scaled = grad_norm();
  optim::DynamicLossScaler::Decision d{};
  try {
    d = scaler_->update(!std::isfinite(scaled));
  } catch (...) {
    // Overflow at min_scale: nothing was updated; put back the scaler's counters too, so
    // the engine is exactly as it was before this step.
    scaler_->restore(scaler_scale_.data<float>()[0], scaler_good_.data<int64_t>()[0]);
    clear_grads();  // a strategy that keeps the grads zeroes them at the next step
    throw;
  }
  save_scaler_state();
  st.skipped = d.skip;
  if (d.skip) {
    st.grad_norm = scaled;  // Inf or NaN
    clear_grads();
    return;
  }
  st.grad_norm = scaled * static_cast<double>(d.unscale);  // the true norm, as f32/bf16 report it
  // Clipping folds into the step's grad_scale: no second pass over the grads.
  const double max_norm = opt_cfg_.max_grad_norm;
  const float clip = max_norm > 0 ? optim::clip_coefficient(st.grad_norm, max_norm) : 1.0f;
  opt_->set_lr(st.lr);
  opt_->step(d.unscale * clip);
  for (auto& s : strategies_) s->after_update();
}

void TrainEngine::save_scaler_state() {
  scaler_scale_.data<float>()[0] = scaler_->scale();
  scaler_good_.data<int64_t>()[0] = scaler_->good_steps();
}

double TrainEngine::evaluate(const Tensor& inputs, const Tensor& targets) {
  check_batch(inputs, targets, "evaluate");
  cancelled_ = false;
  call_ = "evaluate";
  const int64_t B = inputs.dim(0), M = opt_cfg_.micro_batches, mb = B / M;
  double sum = 0.0;
  int64_t total = 0;
  run([&] {  // in micro-batches: the same memory bound as training
    std::vector<MicroBatch> mbs(static_cast<size_t>(M));
    for (int64_t m = 0; m < M; ++m) {
      mbs[static_cast<size_t>(m)].in = inputs.slice0(m * mb, (m + 1) * mb);
      mbs[static_cast<size_t>(m)].tg = targets.slice0(m * mb, (m + 1) * mb);
      for (auto& s : strategies_) s->select_tokens(mbs[static_cast<size_t>(m)].in, mbs[static_cast<size_t>(m)].tg);
    }
    parallel::PipeStats stats;
    sum = run_actions(actions_for(M, true), mbs, true, stats);
    for (auto& s : strategies_) s->sum_loss(&sum, 1);
    total = count_targets(targets);
  });
  return total > 0 ? sum / static_cast<double>(total) : 0.0;
}

std::vector<io::CheckpointTensor> TrainEngine::scaler_tensors() {
  if (!scaler_) return {};
  return {{"loss_scaler.scale", scaler_scale_, nn::ShardSpec{}}, {"loss_scaler.good_steps", scaler_good_, nn::ShardSpec{}}};
}

std::vector<io::CheckpointTensor> TrainEngine::state_tensors() {
  std::vector<io::CheckpointTensor> out;
  if (sharded_state_) {
    // The single-rank layout, gathered: a sharded checkpoint loads into any layout.
    run([&] { out = sharded_state_->whole_state(*opt_); });
  } else {
    for (nn::Parameter* p : model_.parameters()) out.push_back({p->name, p->value, p->spec});
    for (auto& [name, t] : opt_->state()) out.push_back({name, t, nn::ShardSpec{}});
  }
  for (auto& t : scaler_tensors()) out.push_back(t);  // kept current by every step: no sync
  return out;
}

std::vector<io::CheckpointTensor> TrainEngine::load_targets() {
  if (!sharded_state_) return state_tensors();  // the live tensors themselves
  std::vector<io::CheckpointTensor> dest = sharded_state_->load_targets(*opt_);
  for (auto& t : scaler_tensors()) dest.push_back(t);
  return dest;
}

void TrainEngine::finish_load() {
  if (sharded_state_)
    sharded_state_->finish_load(*opt_);
  else
    opt_->after_load();
  // state_tensors() holds the f32 masters of mixed precision too, so nothing to re-derive;
  // the loss scaler reads its state back from its tensors, as the optimizer's step counter is.
  if (scaler_) scaler_->restore(scaler_scale_.data<float>()[0], scaler_good_.data<int64_t>()[0]);
}

std::vector<parallel::LocalPiece> TrainEngine::local_state() {
  std::vector<parallel::LocalPiece> out;
  if (sharded_state_) {
    run([&] { out = sharded_state_->local_state(*opt_); });
  } else {
    for (nn::Parameter* p : model_.parameters()) out.push_back({p->name, p->value.shape(), 0, p->value.numel(), p->value});
    for (auto& [name, t] : opt_->state()) out.push_back({name, t.shape(), 0, t.numel(), t});
  }
  for (auto& t : scaler_tensors()) out.push_back({t.name, t.tensor.shape(), 0, t.tensor.numel(), t.tensor});
  return out;
}

void TrainEngine::finish_local_load() {
  if (sharded_state_)
    run([&] { sharded_state_->finish_local_load(*opt_); });
  else
    opt_->after_load();
  if (scaler_) scaler_->restore(scaler_scale_.data<float>()[0], scaler_good_.data<int64_t>()[0]);
}

nlohmann::json TrainEngine::checkpoint_metadata(const nlohmann::json& extra) const {
  return {{"step", opt_->steps()},
          {"model", model_.config().str()},
          {"config", io::config_to_json(model_.config())},
          {"extra", extra.is_null() ? nlohmann::json::object() : extra}};
}

nlohmann::json TrainEngine::check_checkpoint(const std::string& dir, const std::string& stem) {
  // The config first: a model of another shape would mostly fail on tensor shapes, but
  // one that differs only in norm, position scheme or activation would load silently.
  const nlohmann::json idx = io::read_checkpoint_index(dir, stem);
  const std::string diff = io::config_mismatch(idx["metadata"].value("config", nlohmann::json()), model_.config());
  DT_CHECK(diff.empty(), "checkpoint " + io::checkpoint_index_path(dir, stem) + " was written by another model: " + diff);
  if (scaler_) {
    // The scaler's state is checked against this engine's options (good_steps must be below
    // its growth_interval) before anything is written: read it alone first, into a probe.
    Tensor scale = Tensor::zeros({1}, DType::F32), good = Tensor::zeros({1}, DType::I64);
    io::load_checkpoint(dir, {{"loss_scaler.scale", scale, {}}, {"loss_scaler.good_steps", good, {}}}, stem, &idx);
    optim::DynamicLossScaler probe = *scaler_;
    probe.restore(scale.data<float>()[0], good.data<int64_t>()[0]);
  }
  return idx;
}

void TrainEngine::save(const std::string& dir, const nlohmann::json& extra, const std::string& stem) {
  std::vector<io::CheckpointTensor> state = state_tensors();
  const nlohmann::json meta = checkpoint_metadata(extra);
  std::error_code ec;  // a missing directory is created; save_checkpoint reports what still fails
  std::filesystem::create_directories(dir, ec);
  io::save_checkpoint(dir, state, meta, stem);
}

nlohmann::json TrainEngine::load(const std::string& dir, const std::string& stem) {
  const nlohmann::json idx = check_checkpoint(dir, stem);
  const nlohmann::json meta = io::load_checkpoint(dir, load_targets(), stem, &idx);
  finish_load();
  return meta.value("extra", nlohmann::json::object());
}

}  // namespace dt::engine
