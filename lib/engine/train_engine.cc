#include "engine/train_engine.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "core/error.h"
#include "core/tensor_copy.h"
#include "core/trace.h"
#include "io/model_config.h"
#include "nn/loss.h"
#include "optim/clip.h"

namespace dt::engine {

std::string metrics_json(const StepStats& s) {
  nlohmann::json j = {{"step", s.step},       {"loss", s.loss},       {"grad_norm", s.grad_norm},
                      {"lr", s.lr},           {"tokens", s.tokens},   {"seconds", s.seconds},
                      {"tokens_per_s", s.tokens_per_s}, {"loss_scale", s.loss_scale}, {"skipped", s.skipped}};
  return j.dump();
}

TrainEngine::TrainEngine(std::shared_ptr<comm::Mesh> mesh, nn::GPT& model, optim::Optimizer& opt,
                         const TrainOptions& o)
    : mesh_(std::move(mesh)), model_(model), opt_(&opt), opt_cfg_(o) {
  DT_CHECK(!mesh_ || mesh_->world_size() == 1,
           "TrainEngine: mesh world size = " + std::to_string(mesh_ ? mesh_->world_size() : 1) +
               "; accepted for now: 1 (data parallelism comes with the DDP engine)");
  DT_CHECK(o.micro_batches >= 1, "micro_batches = " + std::to_string(o.micro_batches) + "; accepted: >= 1");
  DT_CHECK(o.max_grad_norm == o.max_grad_norm, "max_grad_norm is NaN; accepted: a number (<= 0: no clipping)");
  // Loss-scaler options are checked for every model, so a bad one never waits for f16.
  optim::DynamicLossScaler checked(o.loss_scaler);
  if (model_.config().dtype == DType::F16) {
    scaler_ = std::make_unique<optim::DynamicLossScaler>(checked);
    scaler_scale_ = Tensor::zeros({1}, DType::F32, Device::cpu(), MemTag::Optimizer);
    scaler_good_ = Tensor::zeros({1}, DType::I64, Device::cpu(), MemTag::Optimizer);
    save_scaler_state();
  }
  // Buckets for the grad-ready hook: each block's parameters, then everything else.
  std::set<const nn::Parameter*> in_blocks;
  for (auto& b : model_.blocks()) {
    block_params_.push_back(b->parameters());
    for (nn::Parameter* p : block_params_.back()) in_blocks.insert(p);
  }
  for (nn::Parameter* p : model_.parameters())
    if (!in_blocks.count(p)) rest_params_.push_back(p);
}

void TrainEngine::enable_data_parallel(comm::Communicator& dp, int64_t bucket_bytes) {
  std::vector<nn::ParamList> order(block_params_.rbegin(), block_params_.rend());  // backward's order
  order.push_back(rest_params_);
  buckets_ = std::make_unique<parallel::GradBuckets>(order, dp, bucket_bytes);
  dp_ = &dp;
}

void TrainEngine::enable_zero(comm::Communicator& dp, int stage, const optim::Optimizer& prototype) {
  DT_CHECK(stage >= 1 && stage <= 3, "zero = " + std::to_string(stage) + "; accepted: 0 (DDP), 1, 2 or 3");
  std::vector<nn::ParamList> units = {rest_params_};
  std::vector<std::string> names = {"embed_head"};
  for (size_t i = 0; i < block_params_.size(); ++i) {
    units.push_back(block_params_[i]);
    names.push_back("block." + std::to_string(i));
  }
  zero_ = std::make_unique<parallel::ZeroSharding>(stage, units, names, dp);
  zero_opt_ = prototype.clone_over(zero_->shard_params());
  // The prototype's state (it may have stepped, or been loaded) in single-rank layout.
  std::map<std::string, Tensor> whole;
  for (auto& [name, t] : prototype.state()) whole[name] = t;
  // An f32 model's values are their own masters, and its values are already in the shards.
  zero_->load_whole_state([&](const std::string& n) { auto it = whole.find(n); return it == whole.end() ? nullptr : &it->second; },
                          *zero_opt_, false);
  opt_ = zero_opt_.get();
  dp_ = &dp;
}

void TrainEngine::gather_model() {
  if (zero_) run([&] { zero_->gather_all(); });
}

void TrainEngine::zero_need(int unit) {
  if (zero_) zero_->need_values(unit);
}

void TrainEngine::announce(const nn::ParamList& ready, int unit, bool last) {
  if (hook_ && last) hook_(ready);  // first: a test's hook may plant values that must be reduced
  if (buckets_ && last) buckets_->mark_ready(ready);
  // ZeRO-1 accumulates whole grads and reduces once; stages 2/3 keep only shards, so they
  // reduce every micro-batch and accumulate the sums.
  if (zero_ && (last || zero_->stage() >= 2)) zero_->reduce_grads(unit);
}

// A double summed over the dp group exactly enough for a loss or a squared norm: as a float
// pair (hi, lo), hi + lo == x to about 2^-48, each summed in f32 over a handful of ranks.
// Inf or NaN stays non-finite (hi carries it, lo becomes NaN).
double TrainEngine::dp_sum(double x) const {
  if (!dp_) return x;
  float v[2] = {static_cast<float>(x), 0.0f};
  v[1] = static_cast<float>(x - static_cast<double>(v[0]));
  const Device d = model_.device();
  if (d.type == DeviceType::CPU) {
    dp_->all_reduce(v, v, 2, DType::F32, comm::ReduceOp::Sum);
  } else {  // a GPU model's dp communicator (NCCL) takes device buffers only
    Tensor buf = Tensor::uninit({2}, DType::F32, d);
    copy_between(d, buf.raw(), Device::cpu(), v, sizeof v);
    dp_->all_reduce(buf.raw(), buf.raw(), 2, DType::F32, comm::ReduceOp::Sum);
    copy_between(Device::cpu(), v, d, buf.raw(), sizeof v);
  }
  return static_cast<double>(v[0]) + static_cast<double>(v[1]);
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

double TrainEngine::forward_pieces(const Tensor& in, const Tensor& tg, nn::GPTActs& a) {
  // GPT::forward_loss, in pieces. ZeRO units: 0 = embeddings, final norm and head, 1 + i =
  // block i. At stage 3 each is gathered just before it runs (unit 0 twice: for the
  // embedding, then for the head, whose backward follows at once) while the previous one
  // computes, and freed after: at most two units are whole at a time.
  const int n = model_.num_blocks();
  zero_need(0);
  if (zero_) zero_->prefetch_values(1);
  {
    TraceSpan span("compute", "forward embed");
    model_.embed(in, a);
  }
  if (zero_) zero_->release_values(0);
  for (int i = 0; i < n; ++i) {
    zero_need(1 + i);
    if (zero_) zero_->prefetch_values(i + 1 < n ? 2 + i : 0);  // the next block, or the head
    {
      TraceSpan span("compute", "forward block " + std::to_string(i));
      model_.forward_blocks(i, i + 1, a);
    }
    if (zero_) zero_->release_values(1 + i);
  }
  zero_need(0);
  TraceSpan span("compute", "forward head");
  model_.head(a);
  a.targets = tg;
  a.ignore_index = opt_cfg_.ignore_index;
  return nn::cross_entropy_loss(a.logits, tg, opt_cfg_.ignore_index, a.ce);
}

double TrainEngine::micro_step(const Tensor& in, const Tensor& tg, float grad_scale, bool last) {
  nn::GPTActs& a = acts_;
  const int n = model_.num_blocks();
  const double mean = forward_pieces(in, tg, a);
  // GPT::backward, in pieces, so that finished buckets can be announced (DDP overlap) and
  // ZeRO can gather, reduce and free block by block.
  if (zero_) {
    zero_->prefetch_values(n);  // the last block, during the head's backward
    zero_->begin_grads(0);
  }
  {
    TraceSpan span("compute", "backward head");
    nn::cross_entropy_loss_backward(a.logits, tg, opt_cfg_.ignore_index, a.ce, a.dlogits, grad_scale);
    model_.backward_head(a.dlogits, a);
  }
  // The embeddings' backward needs only their grads, so unit 0's values can go now.
  if (zero_) zero_->release_values(0);
  for (int i = n - 1; i >= 0; --i) {
    if (zero_) {
      zero_need(1 + i);
      if (i > 0) zero_->prefetch_values(i);  // the block before (unit i)
      zero_->begin_grads(1 + i);
    }
    {
      TraceSpan span("compute", "backward block " + std::to_string(i));
      model_.backward_blocks(i, i + 1, a);
    }
    announce(block_params_[static_cast<size_t>(i)], 1 + i, last);
    if (zero_) zero_->release_values(1 + i);
  }
  {
    TraceSpan span("compute", "backward embed");
    model_.backward_embed(a);
  }
  announce(rest_params_, 0, last);
  return mean * static_cast<double>(a.ce.count);
}

StepStats TrainEngine::train_step(const Tensor& inputs, const Tensor& targets) {
  check_batch(inputs, targets, "train_step");
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t dp = dp_ ? dp_->size() : 1, M = opt_cfg_.micro_batches;
  DT_CHECK(inputs.dim(0) % (dp * M) == 0, "train_step: global batch B = " + std::to_string(inputs.dim(0)) +
                                              " is not divisible by dp (" + std::to_string(dp) + ") x micro_batches (" +
                                              std::to_string(M) + ")");
  const int64_t local = inputs.dim(0) / dp, mb = local / M, r0 = dp_ ? dp_->rank() * local : 0;
  StepStats st;
  run([&] {
    if (zero_)
      zero_->begin_step();
    else
      opt_->zero_grad();
    const float loss_scale = scaler_ ? scaler_->scale() : 1.0f;
    // The global batch's target count (every rank sees the whole batch, so no collective).
    const int64_t total = count_targets(targets);
    double loss_sum = 0.0;
    for (int64_t m = 0; m < M; ++m) {
      Tensor in = inputs.slice0(r0 + m * mb, r0 + (m + 1) * mb), tg = targets.slice0(r0 + m * mb, r0 + (m + 1) * mb);
      const int64_t n = count_targets(tg);
      // d(batch mean)/d(micro mean) = n / total; a micro-batch with nothing to learn adds 0.
      const float scale = total > 0 ? static_cast<float>(static_cast<double>(n) / static_cast<double>(total)) : 0.0f;
      loss_sum += micro_step(in, tg, scale * loss_scale, m == M - 1);
    }
    if (buckets_) buckets_->finish();  // the summed gradients, identical on every replica
    if (zero_) zero_->finish_grads();  // this rank's shard of the summed gradients
    loss_sum = dp_sum(loss_sum);
    st.loss = total > 0 ? loss_sum / static_cast<double>(total) : 0.0;
    finish_step(st, loss_scale);
  });
  st.step = opt_->steps();
  st.tokens = inputs.numel();
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  st.tokens_per_s = st.seconds > 0 ? static_cast<double>(st.tokens) / st.seconds : 0.0;
  return st;
}

void TrainEngine::finish_step(StepStats& st, float loss_scale) {
  TraceSpan span("compute", "optimizer step");
  const nn::ParamList& ps = opt_->params();
  // The schedule is a function of the update count, which checkpoints restore.
  st.lr = opt_cfg_.schedule.lr(opt_->steps());
  st.loss_scale = loss_scale;
  // ZeRO: each rank holds a shard of the grads, so the squared sums add up over dp; every
  // rank then has the same norm and takes the same clip and skip decisions.
  optim::SquaredSumReducer reduce;
  if (zero_) reduce = [&](double& sq) { sq = dp_sum(sq); };
  if (!scaler_) {
    st.grad_norm = optim::global_grad_norm(ps, reduce);
    const float clip = opt_cfg_.max_grad_norm > 0 ? optim::clip_coefficient(st.grad_norm, opt_cfg_.max_grad_norm) : 1.0f;
    opt_->set_lr(st.lr);
    opt_->step(clip);
    if (zero_) zero_->after_step();
    return;
  }
  // One pass: the scaled norm is non-finite exactly when some gradient overflowed.
  const double scaled = optim::global_grad_norm(ps, reduce);
  optim::DynamicLossScaler::Decision d{};
  try {
    d = scaler_->update(!std::isfinite(scaled));
  } catch (...) {
    // Overflow at min_scale: nothing was updated; put back the scaler's counters too, so
    // the engine is exactly as it was before this step.
    scaler_->restore(scaler_scale_.data<float>()[0], scaler_good_.data<int64_t>()[0]);
    if (!zero_) opt_->zero_grad();  // ZeRO zeroes at the start of the next step
    throw;
  }
  save_scaler_state();
  st.skipped = d.skip;
  if (d.skip) {
    st.grad_norm = scaled;  // Inf or NaN
    if (!zero_) opt_->zero_grad();
    return;
  }
  st.grad_norm = scaled * static_cast<double>(d.unscale);  // the true norm, as f32/bf16 report it
  // Clipping folds into the step's grad_scale: no second pass over the grads.
  const double max_norm = opt_cfg_.max_grad_norm;
  const float clip = max_norm > 0 ? optim::clip_coefficient(st.grad_norm, max_norm) : 1.0f;
  opt_->set_lr(st.lr);
  opt_->step(d.unscale * clip);
  if (zero_) zero_->after_step();
}

void TrainEngine::save_scaler_state() {
  scaler_scale_.data<float>()[0] = scaler_->scale();
  scaler_good_.data<int64_t>()[0] = scaler_->good_steps();
}

double TrainEngine::evaluate(const Tensor& inputs, const Tensor& targets) {
  check_batch(inputs, targets, "evaluate");
  const int64_t B = inputs.dim(0), M = opt_cfg_.micro_batches, mb = B / M;
  double sum = 0.0;
  int64_t total = 0;
  run([&] {
    for (int64_t m = 0; m < M; ++m) {  // in micro-batches: the same memory bound as training
      nn::GPTActs a;
      double mean = forward_pieces(inputs.slice0(m * mb, (m + 1) * mb), targets.slice0(m * mb, (m + 1) * mb), a);
      if (zero_) zero_->release_values(0);
      sum += mean * static_cast<double>(a.ce.count);
      total += a.ce.count;
    }
  });
  return total > 0 ? sum / static_cast<double>(total) : 0.0;
}

std::vector<io::CheckpointTensor> TrainEngine::state_tensors() {
  std::vector<io::CheckpointTensor> out;
  if (zero_) {
    // The single-rank layout, gathered over dp: a ZeRO checkpoint loads into any layout.
    run([&] {
      const bool whole = zero_->stage() < 3;
      if (!whole) zero_->gather_all();
      for (int k = 0; k < zero_->num_units(); ++k) zero_need(k);  // stages 1/2: pending gathers
      out = zero_->whole_state(*opt_);
    });
  } else {
    for (nn::Parameter* p : model_.parameters()) out.push_back({p->name, p->value, p->spec});
    for (auto& [name, t] : opt_->state()) out.push_back({name, t, nn::ShardSpec{}});
  }
  if (scaler_) {  // kept current by every step, so a save needs no sync
    out.push_back({"loss_scaler.scale", scaler_scale_, nn::ShardSpec{}});
    out.push_back({"loss_scaler.good_steps", scaler_good_, nn::ShardSpec{}});
  }
  return out;
}

void TrainEngine::save(const std::string& dir, const nlohmann::json& extra, const std::string& stem, bool write) {
  const bool was_whole = zero_ && zero_->pinned();
  std::vector<io::CheckpointTensor> state = state_tensors();  // collective under ZeRO
  // ZeRO-3 gathered the values for this save alone: free them again once written.
  struct Release {
    parallel::ZeroSharding* z;
    ~Release() {
      if (z) z->release_all();
    }
  } release{zero_ && !was_whole ? zero_.get() : nullptr};
  if (!write) return;
  nlohmann::json meta = {{"step", opt_->steps()},
                         {"model", model_.config().str()},
                         {"config", io::config_to_json(model_.config())},
                         {"extra", extra}};
  std::error_code ec;  // a missing directory is created; save_checkpoint reports what still fails
  std::filesystem::create_directories(dir, ec);
  io::save_checkpoint(dir, state, meta, stem);
}

nlohmann::json TrainEngine::load(const std::string& dir, const std::string& stem) {
  // The config first: a model of another shape would mostly fail on tensor shapes, but
  // one that differs only in norm, position scheme or activation would load silently.
  const nlohmann::json idx = io::read_checkpoint_index(dir, stem);
  const std::string diff = io::config_mismatch(idx["metadata"].value("config", nlohmann::json()), model_.config());
  DT_CHECK(diff.empty(), "checkpoint " + io::checkpoint_index_path(dir, stem) + " was written by another model: " + diff);
  if (scaler_) {
    // The scaler's state is checked against this engine's options (good_steps must be below
    // its growth_interval) before anything is written: read it alone first, into a probe.
    Tensor scale = Tensor::zeros({1}, DType::F32), good = Tensor::zeros({1}, DType::I64);
    io::load_checkpoint(dir, {{"loss_scaler.scale", scale, {}}, {"loss_scaler.good_steps", good, {}}}, stem);
    optim::DynamicLossScaler probe = *scaler_;
    probe.restore(scale.data<float>()[0], good.data<int64_t>()[0]);
  }
  nlohmann::json meta;
  if (zero_) {
    // Every rank reads the whole tensors, then keeps its shards (nothing is written before
    // the whole checkpoint was read and checked).
    std::vector<std::pair<std::string, Tensor>> whole = zero_->whole_state_templates(*opt_);
    std::vector<io::CheckpointTensor> dest;
    for (auto& [name, t] : whole) dest.push_back({name, t, nn::ShardSpec{}});
    if (scaler_) {
      dest.push_back({"loss_scaler.scale", scaler_scale_, nn::ShardSpec{}});
      dest.push_back({"loss_scaler.good_steps", scaler_good_, nn::ShardSpec{}});
    }
    meta = io::load_checkpoint(dir, dest, stem);
    std::map<std::string, const Tensor*> by_name;
    for (auto& [name, t] : whole) by_name[name] = &t;
    zero_->load_whole_state([&](const std::string& n) { auto it = by_name.find(n); return it == by_name.end() ? nullptr : it->second; },
                            *opt_, true);
  } else {
    meta = io::load_checkpoint(dir, state_tensors(), stem);
    opt_->after_load();
  }
  // state_tensors() holds the f32 masters of mixed precision too, so nothing to re-derive;
  // the loss scaler reads its state back from its tensors, as the optimizer's step counter is.
  if (scaler_) scaler_->restore(scaler_scale_.data<float>()[0], scaler_good_.data<int64_t>()[0]);
  return meta.value("extra", nlohmann::json::object());
}

}  // namespace dt::engine
