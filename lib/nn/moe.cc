#include "nn/moe.h"

#include <algorithm>
#include <cmath>

#include "core/device_scope.h"
#include "core/error.h"
#include "core/tensor_copy.h"
#include "kernels/ops.h"

namespace dt::nn {

void MoEStats::add(const MoEStats& o, double weight) {
  if (tokens.size() < o.tokens.size()) tokens.resize(o.tokens.size(), 0);
  for (size_t e = 0; e < o.tokens.size(); ++e) tokens[e] += o.tokens[e];
  if (block_tokens.size() < o.block_tokens.size()) block_tokens.resize(o.block_tokens.size(), 0);
  for (size_t i = 0; i < o.block_tokens.size(); ++i) block_tokens[i] += o.block_tokens[i];
  dropped += o.dropped;
  aux_loss += weight * o.aux_loss;
  z_loss += weight * o.z_loss;
  exchanged_bytes += o.exchanged_bytes;
  exchanged_bytes_uniform += o.exchanged_bytes_uniform;
}

double busiest_rank_pace(const std::vector<int64_t>& block_tokens, int64_t E, int64_t ep) {
  DT_CHECK(E >= 1 && ep >= 1 && E % ep == 0, "busiest_rank_pace: ep must divide the experts");
  double busiest = 0, all = 0;
  for (size_t b = 0; b + static_cast<size_t>(E) <= block_tokens.size(); b += static_cast<size_t>(E)) {
    int64_t most = 0;
    for (int64_t g = 0; g < ep; ++g) {
      int64_t rows = 0;
      for (int64_t e = g * (E / ep); e < (g + 1) * (E / ep); ++e) rows += block_tokens[b + static_cast<size_t>(e)];
      most = std::max(most, rows);
      all += static_cast<double>(rows);
    }
    busiest += static_cast<double>(most);
  }
  return all > 0 ? busiest * static_cast<double>(ep) / all : 1.0;
}

int64_t expert_capacity(float factor, int64_t R, int64_t k, int64_t E) {
  if (factor <= 0) return 0;
  return static_cast<int64_t>(std::ceil(static_cast<double>(factor) * static_cast<double>(R * k) / static_cast<double>(E)));
}

std::vector<int32_t> route_slots(const int32_t* idx, int64_t R, int64_t k, int64_t E, int64_t capacity,
                                 std::vector<int64_t>& tokens, std::vector<int64_t>& picked, int64_t& dropped) {
  picked.assign(static_cast<size_t>(E), 0);
  for (int64_t i = 0; i < R * k; ++i) {
    DT_CHECK(idx[i] >= 0 && idx[i] < E, "route_slots: idx entry " + std::to_string(i) + " holds expert " +
                                            std::to_string(idx[i]) + "; accepted: 0 to " + std::to_string(E - 1));
    ++picked[static_cast<size_t>(idx[i])];
  }
  tokens.assign(static_cast<size_t>(E), 0);
  std::vector<int64_t> start(static_cast<size_t>(E), 0);  // each expert's first slot
  int64_t s = 0;
  for (int64_t e = 0; e < E; ++e) {
    start[static_cast<size_t>(e)] = s;
    tokens[static_cast<size_t>(e)] = capacity > 0 ? std::min(capacity, picked[static_cast<size_t>(e)])
                                                  : picked[static_cast<size_t>(e)];
    s += tokens[static_cast<size_t>(e)];
  }
  std::vector<int64_t> used(static_cast<size_t>(E), 0);
  std::vector<int32_t> slots(static_cast<size_t>(R * k));
  dropped = 0;
  for (int64_t i = 0; i < R * k; ++i) {  // row-major: by row, then choice
    const size_t e = static_cast<size_t>(idx[i]);
    if (used[e] < tokens[e]) {
      slots[static_cast<size_t>(i)] = static_cast<int32_t>(start[e] + used[e]++);
    } else {
      slots[static_cast<size_t>(i)] = -1;
      ++dropped;
    }
  }
  return slots;
}

MoE::MoE(const std::string& name, const GPTConfig& c, float proj_std, EpGroup ep_)
    : num_experts(c.n_experts),
      top_k(c.top_k),
      gating(c.moe_gating),
      renormalize(c.moe_renormalize),
      aux_coef(c.moe_aux_coef),
      z_coef(c.moe_z_coef),
      capacity_factor(c.moe_capacity),
      ep(ep_),
      router(name + ".router", c.d_model, c.n_experts, /*bias=*/false, c.seed, 0.02f, c.dtype) {
  DT_CHECK(num_experts % ep.size() == 0, "GPTConfig.n_experts = " + std::to_string(num_experts) +
                                             " does not divide over ep = " + std::to_string(ep.size()) +
                                             "; accepted: experts divisible by ep");
  const int64_t local = num_experts / ep.size();
  first_expert = ep.rank() * local;
  for (int64_t e = first_expert; e < first_expert + local; ++e)
    experts.push_back(std::make_unique<MLP>(name + ".experts." + std::to_string(e), c.d_model, c.d_ff, c.act, c.bias,
                                            c.seed, proj_std, c.dtype));
  if (c.moe_shared_d_ff > 0)
    shared = std::make_unique<MLP>(name + ".shared", c.d_model, c.moe_shared_d_ff, c.act, c.bias, c.seed, proj_std, c.dtype);
  if (c.moe_shared_gate)
    shared_gate = std::make_unique<Linear>(name + ".shared_gate", c.d_model, 1, /*bias=*/false, c.seed, 0.02f, c.dtype);
}

void MoE::collect(ParamList& list) {
  router.collect(list);
  for (auto& e : experts) e->collect(list);
  if (shared) shared->collect(list);
  if (shared_gate) shared_gate->collect(list);
}

const Tensor& MoE::row_slots(int64_t R, Device dev) {
  if (!row_slots_.defined() || row_slots_.dim(0) != R || row_slots_.device() != dev) {
    Tensor host = Tensor::uninit({R, 1}, DType::I32);
    for (int64_t r = 0; r < R; ++r) host.data<int32_t>()[r] = static_cast<int32_t>(r);
    row_slots_ = to_device(host, dev, MemTag::Activation);
  }
  return row_slots_;
}

void MoE::add_shared(const Tensor& x, Acts& a) {
  const Tensor& ys = shared->forward(x, a.shared);
  if (!shared_gate) {
    kernels::add(a.y, ys, a.y);
    return;
  }
  const int64_t R = x.rows();
  shared_gate->forward(x, a.shared_logit);
  ensure(a.shared_idx, {R, 1}, DType::I32);
  ensure(a.shared_gate, {R, 1}, DType::F32);
  ensure(a.shared_probs, {R, 1}, DType::F32);
  ensure(a.shared_lse, {R}, DType::F32);
  kernels::moe_route(a.shared_logit, 1, kernels::MoeGating::Sigmoid, false, a.shared_idx, a.shared_gate, a.shared_probs,
                     a.shared_lse);
  ensure(a.shared_out, {R, x.cols()}, x.dtype());
  kernels::moe_unpermute(ys, row_slots(R, x.device()), a.shared_gate, a.shared_out);
  kernels::add(a.y, a.shared_out, a.y);
}

void MoE::backward_shared(const Tensor& x, const Tensor& dy, Acts& a, Tensor& dx) {
  const int64_t R = x.rows(), C = x.cols();
  ensure(a.dx_shared, {R, C}, x.dtype());
  if (!shared_gate) {
    shared->backward(dy, a.shared, a.dx_shared);
    kernels::add(dx, a.dx_shared, dx);
    return;
  }
  ensure(a.dshared_y, {R, C}, x.dtype());
  ensure(a.dshared_gate, {R, 1}, DType::F32);
  kernels::moe_unpermute_backward(dy, a.shared.y, row_slots(R, x.device()), a.shared_gate, a.dshared_y, a.dshared_gate);
  if (!no_aux_.defined() || no_aux_.device() != x.device())
    no_aux_ = Tensor::zeros({1}, DType::F32, x.device(), MemTag::Activation);
  ensure(a.dshared_logit, a.shared_logit.shape(), a.shared_logit.dtype());
  kernels::moe_route_backward(a.shared_logit, a.shared_idx, a.shared_gate, a.shared_probs, a.shared_lse,
                              a.dshared_gate, no_aux_, 0.0f, kernels::MoeGating::Sigmoid, false, a.dshared_logit);
  shared_gate->backward(x, a.dshared_logit, a.dx_shared);
  kernels::add(dx, a.dx_shared, dx);
  shared->backward(a.dshared_y, a.shared, a.dx_shared);
  kernels::add(dx, a.dx_shared, dx);
}

const Tensor& MoE::forward(const Tensor& x_in, Acts& a) {
  a.x = x_in;
  const Tensor x = flat2d(x_in);
  const int64_t R = x.rows(), C = x.cols(), E = num_experts, k = top_k;
  const Device dev = x.device();
  router.forward(x, a.logits);
  ensure(a.idx, {R, k}, DType::I32);
  ensure(a.gates, {R, k}, DType::F32);
  ensure(a.probs, {R, E}, DType::F32);
  ensure(a.lse, {R}, DType::F32);
  kernels::moe_route(a.logits, k, gating, renormalize, a.idx, a.gates, a.probs, a.lse);

  // The routing on the host: the slots, and the auxiliary losses' statistics.
  const Tensor idx = to_device(a.idx, Device::cpu());
  std::vector<int32_t> slots = route_slots(idx.data<int32_t>(), R, k, E, expert_capacity(capacity_factor, R, k, E),
                                           a.stats.tokens, a.picked, a.stats.dropped);
  Tensor host_slots = Tensor::uninit({R, k}, DType::I32);
  std::copy(slots.begin(), slots.end(), host_slots.data<int32_t>());
  a.slots = to_device(host_slots, dev, MemTag::Activation);
  const Tensor probs = to_device(a.probs, Device::cpu()), lse = to_device(a.lse, Device::cpu());
  double balance = 0, z = 0;
  for (int64_t e = 0; e < E; ++e) {
    double p = 0;
    for (int64_t r = 0; r < R; ++r) p += probs.data<float>()[r * E + e];
    balance += static_cast<double>(a.picked[static_cast<size_t>(e)]) / static_cast<double>(R * k) * (p / R);
  }
  for (int64_t r = 0; r < R; ++r) z += static_cast<double>(lse.data<float>()[r]) * lse.data<float>()[r];
  a.stats.aux_loss = aux_coef * static_cast<double>(E) * balance;
  a.stats.z_loss = z_coef * z / static_cast<double>(R);

  int64_t S = 0;
  for (int64_t n : a.stats.tokens) S += n;
  ensure(a.xp, {S, C}, x.dtype());
  kernels::moe_permute(x, a.slots, a.xp);
  ensure(a.yp, {S, C}, x.dtype());
  if (ep.size() > 1) {  // the rows travel to their experts' ranks and back
    a.exchange.plan(ep, a.stats.tokens);
    a.exchange.dispatch(a.xp, a.xr);
    if (a.exchange.received_rows() > 0) ensure(a.yr, {a.exchange.received_rows(), C}, x.dtype());
    run_experts(a.xr, a.exchange.local_rows(), a.yr, a);
    a.exchange.combine(a.yr, a.yp);
    const double P = ep.size(), counts = (P - 1) * static_cast<double>(E / ep.size()) * 8.0;
    const double row = static_cast<double>(C) * static_cast<double>(dtype_size(x.dtype()));
    a.stats.exchanged_bytes = counts + 2.0 * static_cast<double>(a.exchange.bytes_out());
    a.stats.exchanged_bytes_uniform = counts + 4.0 * static_cast<double>(R * k) * (P - 1) / P * row;
  } else {
    run_experts(a.xp, a.stats.tokens, a.yp, a);
    a.stats.exchanged_bytes = a.stats.exchanged_bytes_uniform = 0;
  }
  ensure(a.y, {R, C}, x.dtype());
  kernels::moe_unpermute(a.yp, a.slots, a.gates, a.y);
  if (shared) add_shared(x, a);
  return a.y;
}

void MoE::backward(const Tensor& dy_in, Acts& a, Tensor& dx, float grad_scale) {
  const Tensor x = flat2d(a.x);
  const Tensor dy = flat2d(dy_in);
  const int64_t R = x.rows(), C = x.cols(), E = num_experts, S = a.xp.dim(0);
  const DType dt = x.dtype();
  ensure(a.dyp, {S, C}, dt);
  ensure(a.dgates, {R, top_k}, DType::F32);
  kernels::moe_unpermute_backward(dy, a.yp, a.slots, a.gates, a.dyp, a.dgates);
  ensure(a.dxp, {S, C}, dt);
  if (ep.size() > 1) {  // the output's gradient to the experts' ranks, the input's back
    a.exchange.dispatch(a.dyp, a.dyr);
    if (a.exchange.received_rows() > 0) ensure(a.dxr, {a.exchange.received_rows(), C}, dt);
    backward_experts(a.dyr, a.exchange.local_rows(), a.dxr, a);
    a.exchange.combine(a.dxr, a.dxp);
  } else {
    backward_experts(a.dyp, a.stats.tokens, a.dxp, a);
  }
  ensure(dx, a.x.shape(), dt);
  Tensor dx2 = flat2d(dx);
  kernels::moe_permute_backward(a.dxp, a.slots, dx2);

  // The router: the gates' gradient, plus the auxiliary losses' (their linear terms, scaled
  // as the loss is): d aux / d probs[r, e] = aux_coef E f_e / R; d z / d lse[r] = 2 z_coef lse[r] / R.
  Tensor coef = Tensor::uninit({E}, DType::F32);
  for (int64_t e = 0; e < E; ++e)
    coef.data<float>()[e] = static_cast<float>(static_cast<double>(grad_scale) * aux_coef * static_cast<double>(E) *
                                               static_cast<double>(a.picked[static_cast<size_t>(e)]) /
                                               static_cast<double>(R * top_k) / static_cast<double>(R));
  a.aux_coef = to_device(coef, x.device(), MemTag::Activation);
  const float zc = static_cast<float>(2.0 * static_cast<double>(grad_scale) * z_coef / static_cast<double>(R));
  ensure(a.dlogits, a.logits.shape(), a.logits.dtype());
  kernels::moe_route_backward(a.logits, a.idx, a.gates, a.probs, a.lse, a.dgates, a.aux_coef, zc, gating, renormalize,
                              a.dlogits);
  ensure(a.dx_router, {R, C}, dt);
  router.backward(x, a.dlogits, a.dx_router);
  kernels::add(dx2, a.dx_router, dx2);
  if (shared) backward_shared(x, dy, a, dx2);
}

void MoE::seat_experts(const std::vector<int64_t>& rows, DType dt, bool backward, Acts& a) {
  // An MLP's tensors of d_ff columns (nn/layers.h): forward GELU h, a; SwiGLU gate, up, a;
  // backward GELU da, dh; SwiGLU da, dgate, dup. Seats 0-2 forward, 3-5 backward.
  auto fields = [backward, swiglu = experts.front()->act == Act::SwiGLU](MLP::Acts& m) -> std::vector<Tensor*> {
    if (!backward) return swiglu ? std::vector<Tensor*>{&m.gate, &m.up, &m.a} : std::vector<Tensor*>{&m.h, &m.a};
    return swiglu ? std::vector<Tensor*>{&m.da, &m.dgate, &m.dup} : std::vector<Tensor*>{&m.da, &m.dh};
  };
  int64_t total = 0;
  for (int64_t n : rows) total += n;
  a.experts.resize(experts.size());
  a.seats.resize(6);
  const int64_t F = experts.front()->d_ff;
  for (size_t k = 0, first = backward ? 3 : 0; k < fields(a.experts.front()).size(); ++k) {
    Tensor& seat = a.seats[first + k];
    // Grown, never shrunk: under ep the rows received change from step to step.
    if (!seat.defined() || seat.dim(0) < total || seat.dtype() != dt || seat.device() != current_device())
      seat = Tensor::uninit({std::max<int64_t>(total, 1), F}, dt, current_device(), MemTag::Activation);
    for (size_t e = 0, off = 0; e < experts.size(); off += static_cast<size_t>(rows[e]), ++e) {
      const int64_t n = rows[e], o = static_cast<int64_t>(off);
      if (n > 0) *fields(a.experts[e])[k] = seat.slice0(o, o + n);
    }
  }
}

void MoE::run_experts(const Tensor& in, const std::vector<int64_t>& rows, Tensor& out, Acts& a) {
  seat_experts(rows, in.dtype(), false, a);
  for (size_t e = 0, off = 0; e < experts.size(); off += static_cast<size_t>(rows[e]), ++e) {
    const int64_t n = rows[e], o = static_cast<int64_t>(off);
    if (n == 0) continue;
    a.experts[e].y = out.slice0(o, o + n);  // the expert writes its rows of the output in place
    experts[e]->forward(in.slice0(o, o + n), a.experts[e]);
  }
}

void MoE::backward_experts(const Tensor& dout, const std::vector<int64_t>& rows, Tensor& din, Acts& a) {
  seat_experts(rows, dout.dtype(), true, a);
  for (size_t e = 0, off = 0; e < experts.size(); off += static_cast<size_t>(rows[e]), ++e) {
    const int64_t n = rows[e], o = static_cast<int64_t>(off);
    if (n == 0) continue;
    Tensor dxe = din.slice0(o, o + n);
    experts[e]->backward(dout.slice0(o, o + n), a.experts[e], dxe);
  }
}

FeedForward::FeedForward(const std::string& block_name, const GPTConfig& c, TpGroup tp, float proj_std, EpGroup ep) {
  if (!c.moe()) {
    DT_CHECK(ep.size() == 1, "expert parallelism (ep = " + std::to_string(ep.size()) +
                                 ") needs a mixture of experts; accepted: ep = 1 for a dense model, or experts > 0");
    mlp_ = std::make_unique<MLP>(block_name + ".mlp", c.d_model, c.d_ff, c.act, c.bias, c.seed, proj_std, c.dtype, tp);
    return;
  }
  // Under tensor parallelism the experts are not split (Megatron's expert tensor parallel
  // size 1): with SP each tp rank routes its own token rows through whole experts, as the
  // norms run on them, and the router's and experts' gradients are partial over tp.
  DT_CHECK(tp.size() == 1 || tp.sp(), "GPTConfig.n_experts = " + std::to_string(c.n_experts) + " with tp = " +
                                          std::to_string(tp.size()) +
                                          " needs sequence parallelism (each tp rank routes its own token rows, as "
                                          "Megatron requires); accepted: tp = 1, or tp > 1 with sequence_parallel");
  moe_ = std::make_unique<MoE>(block_name + ".moe", c, proj_std, ep);
  if (tp.sp()) {
    ParamList ps;
    moe_->collect(ps);
    for (Parameter* p : ps) p->grad_partial_over_tp = true;
  }
}

void FeedForward::collect(ParamList& list) {
  if (mlp_) mlp_->collect(list);
  else moe_->collect(list);
}

const Tensor& FeedForward::forward(const Tensor& x, Acts& a) {
  return mlp_ ? mlp_->forward(x, a.mlp) : moe_->forward(x, a.moe);
}

void FeedForward::backward(const Tensor& dy, Acts& a, Tensor& dx, float grad_scale) {
  if (mlp_) mlp_->backward(dy, a.mlp, dx);
  else moe_->backward(dy, a.moe, dx, grad_scale);
}

}  // namespace dt::nn
