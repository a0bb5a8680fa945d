#include "parallel/zero.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "core/error.h"
#include "core/tensor_copy.h"
#include "core/trace.h"
#include "kernels/ops.h"
#include "nn/tensor_parallel.h"

namespace dt::parallel {

struct ZeroSharding::Unit {
  std::string name;
  nn::ParamList params;
  std::vector<int64_t> offsets;  // element offset of each parameter in the flat buffer
  int64_t numel = 0, padded = 0, shard = 0;
  DType dtype = DType::F32;
  Device device;
  Tensor full_value;   // stages 1/2 always; stage 3 while gathered
  Tensor shard_value;  // this rank's slice (stages 1/2: a view of full_value)
  Tensor full_grad;    // stage 1 always; stages 2/3 from begin_grads to the end of the reduction
  Tensor shard_grad;   // stage 1: a view of full_grad; stages 2/3 its own buffer
  comm::WorkPtr gather, reduce;
  double gather_us = -1.0, reduce_us = -1.0;  // trace: when each started
};

namespace {

int64_t elem(DType t) { return static_cast<int64_t>(dtype_size(t)); }

// Waits for `work` (the "idle" span on the compute track), then records the collective on
// the comm track from its launch (`since_us`) to now.
void wait_traced(comm::WorkPtr& work, double& since_us, const std::string& kind, const std::string& unit, int64_t bytes) {
  {
    TraceSpan idle("idle", "wait for " + kind + " " + unit);
    work->wait();
  }
  work.reset();
  if (since_us >= 0 && trace_enabled())
    trace_record("comm", kind + " " + unit + " (" + std::to_string(bytes) + " B)", trace_track(trace_current_rank(), true),
                 since_us, trace_now_us());
  since_us = -1.0;
}

}  // namespace

ZeroSharding::ZeroSharding(int stage, const std::vector<nn::ParamList>& units, const std::vector<std::string>& names,
                           comm::Communicator& dp)
    : stage_(stage), dp_(dp) {
  DT_CHECK(stage >= 1 && stage <= 3, "zero = " + std::to_string(stage) + "; accepted here: 1, 2 or 3 (0 is DDP)");
  DT_CHECK(units.size() == names.size(), "ZeroSharding: one name per unit");
  const int64_t n = dp.size(), r = dp.rank();
  shards_.reserve(units.size());  // shard_ptrs_ point into it
  for (size_t k = 0; k < units.size(); ++k) {
    auto u = std::make_unique<Unit>();
    u->name = names[k];
    u->params = units[k];
    DT_CHECK(!u->params.empty(), "ZeroSharding: unit \"" + u->name + "\" has no parameters");
    u->dtype = u->params[0]->value.dtype();
    u->device = u->params[0]->value.device();
    for (nn::Parameter* p : u->params) {
      DT_CHECK(p->value.defined() && p->value.dtype() == u->dtype && p->value.device() == u->device,
               "ZeroSharding: parameter \"" + p->name + "\" differs in dtype or device from the rest of unit \"" +
                   u->name + "\"");
      u->offsets.push_back(u->numel);
      DT_ASSERT(p->shape == p->value.shape());  // Parameter::shape outlives a released value
      u->numel += p->value.numel();
    }
    u->padded = (u->numel + n - 1) / n * n;
    u->shard = u->padded / n;
    // Values: the flat buffer (stages 1/2) or this rank's slice of it (stage 3).
    if (stage_ < 3) {
      u->full_value = Tensor::zeros({u->padded}, u->dtype, u->device, MemTag::Param);
      for (size_t i = 0; i < u->params.size(); ++i)
        copy_between(u->device, static_cast<char*>(u->full_value.raw()) + u->offsets[i] * elem(u->dtype),
                     u->params[i]->value.device(), u->params[i]->value.raw(), u->params[i]->value.nbytes());
      u->shard_value = u->full_value.slice0(r * u->shard, (r + 1) * u->shard);
      bind_values(*u);
    } else {
      u->shard_value = Tensor::zeros({u->shard}, u->dtype, u->device, MemTag::Param);
      copy_shard_in(*u, [&](size_t i) { return &u->params[i]->value; }, u->shard_value);
      unbind_values(*u);
    }
    // Grads: whole and persistent (stage 1) or only the shard (stages 2/3).
    if (stage_ == 1) {
      u->full_grad = Tensor::zeros({u->padded}, u->dtype, u->device, MemTag::Grad);
      u->shard_grad = u->full_grad.slice0(r * u->shard, (r + 1) * u->shard);
      bind_grads(*u);
    } else {
      u->shard_grad = Tensor::zeros({u->shard}, u->dtype, u->device, MemTag::Grad);
      for (nn::Parameter* p : u->params) p->grad = Tensor();
    }
    nn::Parameter sp;
    sp.name = "zero." + u->name;
    sp.shape = {u->shard};
    sp.value = u->shard_value;
    sp.grad = u->shard_grad;
    sp.spec = nn::ShardSpec{0, "dp", {}, false};
    shards_.push_back(sp);
    shard_ptrs_.push_back(&shards_.back());
    units_.push_back(std::move(u));
  }
}

ZeroSharding::~ZeroSharding() {
  // Outstanding collectives read and write our buffers: let them finish (their errors were
  // or will be reported by the step that issued them).
  for (auto& u : units_) {
    comm::wait_ignoring_errors(u->gather);
    comm::wait_ignoring_errors(u->reduce);
  }
}

int64_t ZeroSharding::padding_elements() const {
  int64_t p = 0;
  for (const auto& u : units_) p += u->padded - u->numel;
  return p;
}

void ZeroSharding::bind_values(Unit& u) {
  for (size_t i = 0; i < u.params.size(); ++i)
    u.params[i]->value = u.full_value.slice0(u.offsets[i], u.offsets[i] + u.params[i]->numel()).reshape(u.params[i]->shape);
}

void ZeroSharding::unbind_values(Unit& u) {
  for (nn::Parameter* p : u.params) p->value = Tensor();
}

void ZeroSharding::bind_grads(Unit& u) {
  for (size_t i = 0; i < u.params.size(); ++i)
    u.params[i]->grad = u.full_grad.slice0(u.offsets[i], u.offsets[i] + u.params[i]->numel()).reshape(u.params[i]->shape);
}

void ZeroSharding::copy_shard_in(const Unit& u, const std::function<const Tensor*(size_t)>& src, Tensor& dst) const {
  const int64_t lo = dp_.rank() * u.shard, hi = lo + u.shard, es = static_cast<int64_t>(dtype_size(dst.dtype()));
  for (size_t i = 0; i < u.params.size(); ++i) {
    const int64_t b = std::max(lo, u.offsets[i]), e = std::min(hi, u.offsets[i] + u.params[i]->numel());
    if (b >= e) continue;
    const Tensor* t = src(i);
    DT_ASSERT(t && t->defined() && t->dtype() == dst.dtype() && t->numel() == u.params[i]->numel());
    copy_between(dst.device(), static_cast<char*>(dst.raw()) + (b - lo) * es, t->device(),
                 static_cast<const char*>(t->raw()) + (b - u.offsets[i]) * es, static_cast<size_t>((e - b) * es));
  }
}

// ---- one step ------------------------------------------------------------------------------

void ZeroSharding::release_all() {
  if (!pinned_) return;
  pinned_ = false;
  if (stage_ == 3)
    for (int k = 0; k < num_units(); ++k) release_values(k);
}

void ZeroSharding::begin_step() {
  release_all();
  for (auto& u : units_) {
    DT_ASSERT(!u->reduce);
    kernels::fill(stage_ == 1 ? u->full_grad : u->shard_grad, 0.0f);
  }
}

void ZeroSharding::prefetch_values(int k) {
  if (stage_ != 3 || k < 0 || k >= num_units()) return;
  Unit& u = *units_[static_cast<size_t>(k)];
  if (u.full_value.defined()) return;  // gathered or on its way
  // Not zeroed: the gather writes every element.
  u.full_value = Tensor::uninit({u.padded}, u.dtype, u.device, MemTag::Param);
  u.gather = dp_.all_gather_async(u.shard_value.raw(), u.full_value.raw(), u.shard, u.dtype);
  u.gather_us = trace_enabled() ? trace_now_us() : -1.0;
}

void ZeroSharding::wait_gather(Unit& u) {
  if (u.gather) wait_traced(u.gather, u.gather_us, "all_gather", u.name, u.padded * elem(u.dtype));
}

void ZeroSharding::need_values(int k) {
  Unit& u = *units_.at(static_cast<size_t>(k));
  if (stage_ == 3 && !u.full_value.defined()) prefetch_values(k);
  const bool fresh = stage_ == 3 && u.gather != nullptr;
  wait_gather(u);  // stages 1/2: the gather after_step started
  if (fresh) bind_values(u);
}

void ZeroSharding::release_values(int k) {
  if (stage_ != 3 || pinned_) return;
  Unit& u = *units_.at(static_cast<size_t>(k));
  wait_gather(u);  // a prefetch nobody used: it still writes the buffer
  unbind_values(u);
  u.full_value = Tensor();
}

void ZeroSharding::begin_grads(int k) {
  if (stage_ == 1) return;
  Unit& u = *units_.at(static_cast<size_t>(k));
  if (u.reduce) {  // the previous micro-batch's reduction of this unit
    complete_reduction(u);
    reducing_.erase(std::remove(reducing_.begin(), reducing_.end(), k), reducing_.end());
  }
  // Begun already and not reduced: keep accumulating into it (an interleaved pipeline runs
  // the head's backward of the next micro-batch before the embedding's of this one; the
  // reduction then takes both, each gradient reduced exactly once).
  if (u.full_grad.defined()) return;
  u.full_grad = Tensor::zeros({u.padded}, u.dtype, u.device, MemTag::Grad);
  bind_grads(u);
}

void ZeroSharding::reduce_grads(int k) {
  Unit& u = *units_.at(static_cast<size_t>(k));
  DT_ASSERT(u.full_grad.defined() && !u.reduce);
  // In place: rank r's sum lands on its own slice of the whole buffer.
  char* base = static_cast<char*>(u.full_grad.raw());
  u.reduce = dp_.reduce_scatter_async(base, base + dp_.rank() * u.shard * elem(u.dtype), u.shard, u.dtype,
                                      comm::ReduceOp::Sum);
  u.reduce_us = trace_enabled() ? trace_now_us() : -1.0;
  // Bound the whole grad buffers alive (stages 2/3): finish all but the newest reduction.
  for (int older : reducing_) complete_reduction(*units_[static_cast<size_t>(older)]);
  reducing_.assign(1, k);
}

void ZeroSharding::complete_reduction(Unit& u) {
  if (!u.reduce) return;
  wait_traced(u.reduce, u.reduce_us, "reduce_scatter", u.name, u.padded * elem(u.dtype));
  if (stage_ == 1) return;  // the shard grad is that slice of the whole buffer
  Tensor mine = u.full_grad.slice0(dp_.rank() * u.shard, (dp_.rank() + 1) * u.shard);
  kernels::add(u.shard_grad, mine, u.shard_grad);  // accumulates over micro-batches
  for (nn::Parameter* p : u.params) p->grad = Tensor();
  u.full_grad = Tensor();
}

void ZeroSharding::finish_grads() {
  for (int k : reducing_) complete_reduction(*units_[static_cast<size_t>(k)]);
  reducing_.clear();
}

void ZeroSharding::squared_grad_norm(double& split, double& replicated,
                                     const std::function<bool(const nn::Parameter&)>* apart, double* apart_sq) const {
  split = replicated = 0.0;
  if (apart_sq) *apart_sq = 0.0;
  for (size_t k = 0; k < units_.size(); ++k) {
    const Unit& u = *units_[k];
    const Tensor& g = shards_[k].grad;  // [shard]: elements [lo, hi) of the flat buffer
    const int64_t lo = dp_.rank() * u.shard, hi = lo + u.shard;
    for (size_t j = 0; j < u.params.size(); ++j) {
      const int64_t b = std::max(lo, u.offsets[j]), e = std::min(hi, u.offsets[j] + u.params[j]->numel());
      if (b >= e) continue;  // this parameter lies outside the shard
      const bool aside = apart && apart_sq && (*apart)(*u.params[j]);
      double ignored = 0.0;
      nn::add_grad_squares(*u.params[j], g.slice0(b - lo, e - lo), b - u.offsets[j], aside ? ignored : split,
                           aside ? *apart_sq : replicated);
    }
  }
}

void ZeroSharding::after_step() {
  if (stage_ == 3) return;  // the next forward gathers the shards it needs
  for (auto& u : units_) {
    char* base = static_cast<char*>(u->full_value.raw());
    u->gather = dp_.all_gather_async(base + dp_.rank() * u->shard * elem(u->dtype), base, u->shard, u->dtype);
    u->gather_us = trace_enabled() ? trace_now_us() : -1.0;
  }
  // Waited for here, as DeepSpeed does, so that the values are whole when the step returns
  // (a host may read them at once); the units' gathers still overlap one another.
  for (auto& u : units_) wait_gather(*u);
}

void ZeroSharding::gather_all() {
  for (int k = 0; k < num_units(); ++k) prefetch_values(k);
  for (int k = 0; k < num_units(); ++k) need_values(k);
  pinned_ = true;
}

// ---- checkpoints -----------------------------------------------------------------------------

int ZeroSharding::unit_of_state(const std::string& name, std::string& suffix) const {
  for (int k = 0; k < num_units(); ++k) {
    const std::string prefix = shards_[static_cast<size_t>(k)].name + ".";
    if (name.compare(0, prefix.size(), prefix) == 0) {
      suffix = name.substr(prefix.size());
      return k;
    }
  }
  return -1;
}

std::vector<nn::StateTensor> ZeroSharding::whole_state(const optim::Optimizer& shard_opt) {
  std::vector<nn::StateTensor> out;
  for (auto& u : units_)
    for (size_t i = 0; i < u->params.size(); ++i) {
      DT_CHECK(u->params[i]->value.defined(), "ZeroSharding::whole_state: values of unit \"" + u->name +
                                                  "\" are released; call gather_all() first");
      out.push_back({u->params[i]->name, u->params[i]->value, u->params[i]->spec});
    }
  for (const auto& [name, t] : shard_opt.state()) {
    std::string suffix;
    const int k = unit_of_state(name, suffix);
    if (k < 0) {
      out.push_back({name, t, nn::ShardSpec{}});  // optimizer.step
      continue;
    }
    const Unit& u = *units_[static_cast<size_t>(k)];
    Tensor whole = Tensor::uninit({u.padded}, t.dtype(), t.device(), MemTag::Workspace);
    dp_.all_gather(t.raw(), whole.raw(), u.shard, t.dtype());
    for (size_t i = 0; i < u.params.size(); ++i)
      out.push_back({u.params[i]->name + "." + suffix,
                     whole.slice0(u.offsets[i], u.offsets[i] + u.params[i]->numel()).reshape(u.params[i]->shape),
                     nn::ShardSpec{}});
  }
  return out;
}

std::vector<std::pair<std::string, Tensor>> ZeroSharding::whole_state_templates(const optim::Optimizer& shard_opt) const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& u : units_)
    for (size_t i = 0; i < u->params.size(); ++i)
      out.emplace_back(u->params[i]->name, Tensor::zeros(u->params[i]->shape, u->dtype, Device::cpu(), MemTag::Workspace));
  for (const auto& [name, t] : shard_opt.state()) {
    std::string suffix;
    const int k = unit_of_state(name, suffix);
    if (k < 0) {
      out.emplace_back(name, Tensor::zeros(t.shape(), t.dtype(), Device::cpu(), MemTag::Workspace));
      continue;
    }
    const Unit& u = *units_[static_cast<size_t>(k)];
    for (size_t i = 0; i < u.params.size(); ++i)
      out.emplace_back(u.params[i]->name + "." + suffix, Tensor::zeros(u.params[i]->shape, t.dtype(), Device::cpu(), MemTag::Workspace));
  }
  return out;
}

std::vector<LocalPiece> ZeroSharding::local_state(optim::Optimizer& shard_opt) {
  std::vector<LocalPiece> out;
  // Each parameter's elements inside this rank's range [lo, lo + shard) of the unit's flat
  // buffer, as a view of `shard` (the values' or an optimizer tensor's shard).
  auto pieces = [&](const Unit& u, const Tensor& shard, const std::string& suffix) {
    const int64_t lo = dp_.rank() * u.shard, hi = lo + u.shard;
    for (size_t i = 0; i < u.params.size(); ++i) {
      const int64_t a = std::max(lo, u.offsets[i]), b = std::min(hi, u.offsets[i] + u.params[i]->numel());
      if (a >= b) continue;
      out.push_back({u.params[i]->name + suffix, u.params[i]->shape, a - u.offsets[i], b - u.offsets[i],
                     shard.slice0(a - lo, b - lo), true});
    }
  };
  for (auto& u : units_) {
    wait_gather(*u);  // stages 1/2: a pending gather writes the values
    pieces(*u, u->shard_value, "");
  }
  for (auto& [name, t] : shard_opt.state()) {
    std::string suffix;
    const int k = unit_of_state(name, suffix);
    if (k < 0) out.push_back({name, t.shape(), 0, t.numel(), t, false});  // the step counter
    else pieces(*units_[static_cast<size_t>(k)], t, "." + suffix);
  }
  return out;
}

void ZeroSharding::after_local_load() {
  if (stage_ == 3) {
    release_all();
    return;
  }
  after_step();  // the loaded shards into everyone's whole values
}

void ZeroSharding::load_whole_state(const Lookup& lookup, optim::Optimizer& shard_opt, bool values) {
  auto find = [&](const std::string& name) {
    const Tensor* t = lookup(name);
    DT_CHECK(t != nullptr, "ZeRO: no tensor \"" + name + "\" to take this rank's shard from");
    return t;
  };
  // Look everything up before writing anything: a missing name leaves the state as it was.
  std::vector<std::function<void()>> writes;
  if (values)
    for (int k = 0; k < num_units(); ++k) {
      std::vector<const Tensor*> src;
      for (nn::Parameter* p : units_[static_cast<size_t>(k)]->params) src.push_back(find(p->name));
      writes.push_back([this, k, src] {
        Unit& u = *units_[static_cast<size_t>(k)];
        wait_gather(u);
        copy_shard_in(u, [&](size_t i) { return src[i]; }, u.shard_value);
        if (stage_ < 3)  // every rank read the whole values: no gather needed
          for (size_t i = 0; i < u.params.size(); ++i) copy_tensor(*src[i], u.params[i]->value);
      });
    }
  for (auto& [name, t] : shard_opt.state()) {
    std::string suffix;
    const int k = unit_of_state(name, suffix);
    Tensor dst = t;
    if (k < 0) {
      const Tensor* src = find(name);
      writes.push_back([dst, src]() mutable { copy_tensor(*src, dst); });
      continue;
    }
    const Unit& u = *units_[static_cast<size_t>(k)];
    std::vector<const Tensor*> src;
    for (nn::Parameter* p : u.params) src.push_back(find(p->name + "." + suffix));
    writes.push_back([this, &u, src, dst]() mutable { copy_shard_in(u, [&](size_t i) { return src[i]; }, dst); });
  }
  for (auto& w : writes) w();
  if (values && stage_ == 3) {  // gathered values are stale now
    pinned_ = false;
    for (int k = 0; k < num_units(); ++k) release_values(k);
  }
}

}  // namespace dt::parallel
