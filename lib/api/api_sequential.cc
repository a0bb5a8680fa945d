// Host-driven modules: a sequential container built from a layer list, forward and
// backward of it (and of the MLP preset), losses, and the optimizer step, so that a host can
// write its own training loop for a network the engine does not know.
#include <cmath>
#include <cstring>
#include <sstream>

#include "lib/api/firewall.h"
#include "nn/loss.h"
#include "nn/mlp_model.h"
#include "nn/sequential.h"
#include "nn/sequential_spec.h"
#include "optim/optimizer.h"

using dt::api::guard;
using dt::api::need;

namespace {

// Parses and checks the whole spec (syntax, then the memory its parameters need) before
// building anything, so a refused spec allocates nothing.
std::shared_ptr<dt::nn::Sequential> build(const std::string& spec, uint64_t seed, float init_std) {
  const std::vector<dt::nn::LayerSpec> layers = dt::nn::parse_layer_spec(spec);
  double params = 0;
  for (const dt::nn::LayerSpec& l : layers) params += l.params();
  // Parameters and their gradients, f32 each: what creating the module and one backward hold.
  dt::api::refuse_beyond_memory("dt_module_create_sequential",
                                "option \"layers\" holds " + std::to_string(static_cast<long long>(params)) +
                                    " parameters; they and their gradients (f32)",
                                8.0 * params);
  return dt::nn::build_sequential(layers, spec, seed, init_std);
}

// Sets up forward/backward for a host-driven module; a GPT is driven by the engine.
dt_module& driven(dt_module* m) {
  need(m, "module");
  if (m->forward) return *m;
  auto* mlp = dynamic_cast<dt::nn::MLPModel*>(m->module.get());
  DT_CHECK(mlp, "module is a GPT; accepted: an MLP or a sequential module (a GPT trains through dt_engine_*)");
  auto acts = std::make_shared<dt::nn::MLPModel::Acts>();
  m->forward = [mlp, acts](const dt::Tensor& x) -> const dt::Tensor& { return mlp->forward(x, *acts); };
  m->backward = [mlp, acts](const dt::Tensor& dy, dt::Tensor* dx) {
    DT_CHECK(!acts->z.empty(), "no forward to differentiate; call dt_module_forward first");
    DT_CHECK(dy.dtype() == dt::DType::F32 && dy.shape() == acts->z.back().shape(),
             "dy: expected f32 " + dt::shape_str(acts->z.back().shape()) + " (the last forward's output)");
    mlp->backward(dy, *acts, dx);
  };
  return *m;
}

// A new handle owning a copy of t (the module's buffers are reused by the next call).
dt_tensor* handle_copy(const dt::Tensor& t, dt::MemTag tag) {
  auto* h = new dt_tensor();
  h->t = dt::Tensor::uninit(t.shape(), t.dtype(), t.device(), tag);
  std::memcpy(h->t.raw(), t.raw(), t.nbytes());  // CPU only: these modules are CPU-only
  h->device_name = t.device().str();
  return h;
}

}  // namespace

extern "C" {

dt_status dt_module_create_sequential(const dt_options* config, dt_module** out) {
  return guard("dt_module_create_sequential", [&] {
    need(out, "out");
    dt::OptionReader r(dt::api::opts_of(config), "dt_module_create_sequential", {"layers", "seed", "init_std"});
    DT_CHECK(r.has("layers"), std::string("option \"layers\" is required; ") + dt::nn::layer_spec_grammar());
    const double std_ = r.get_double("init_std", 0.02);
    DT_CHECK(std_ >= 0 && std_ < 1e6, "option \"init_std\" = " + std::to_string(std_) + "; accepted: >= 0");
    auto seq = build(r.get_string("layers", ""), static_cast<uint64_t>(r.get_int("seed", 1337)), static_cast<float>(std_));
    auto h = std::make_unique<dt_module>();
    h->module = seq;
    dt::nn::Sequential* s = seq.get();
    h->forward = [s](const dt::Tensor& x) -> const dt::Tensor& { return s->forward(x); };
    h->backward = [s](const dt::Tensor& dy, dt::Tensor* dx) { s->backward(dy, dx); };
    *out = h.release();
  });
}

dt_status dt_module_forward(dt_module* module, const dt_tensor* x, dt_tensor** y) {
  return guard("dt_module_forward", [&] {
    dt_module& m = driven(module);
    const dt::Tensor& in = dt::api::single_piece(x, "x");
    need(y, "y");
    *y = handle_copy(m.forward(in), dt::MemTag::Activation);
  });
}

dt_status dt_module_backward(dt_module* module, const dt_tensor* dy, dt_tensor** dx) {
  return guard("dt_module_backward", [&] {
    dt_module& m = driven(module);
    const dt::Tensor& g = dt::api::single_piece(dy, "dy");
    dt::Tensor gx;
    m.backward(g, dx ? &gx : nullptr);
    if (dx) *dx = handle_copy(gx, dt::MemTag::Activation);
  });
}

dt_status dt_module_zero_grad(dt_module* module) {
  return guard("dt_module_zero_grad", [&] { need(module, "module")->module->zero_grad(); });
}

dt_status dt_loss(const char* kind, const dt_tensor* pred, const dt_tensor* target, double* loss, dt_tensor** dpred) {
  return guard("dt_loss", [&] {
    const std::string k = need(kind, "kind");
    const dt::Tensor& p = dt::api::single_piece(pred, "pred");
    const dt::Tensor& t = dt::api::single_piece(target, "target");
    need(loss, "loss");
    dt::Tensor d;
    if (k == "mse") {
      DT_CHECK(p.dtype() == dt::DType::F32 && t.dtype() == dt::DType::F32 && p.shape() == t.shape(),
               "mse: pred and target must be f32 of one shape; got " + dt::shape_str(p.shape()) + " and " +
                   dt::shape_str(t.shape()));
      dt::nn::MSEState s;
      *loss = dt::nn::mse_loss(p, t, s);
      if (dpred) dt::nn::mse_loss_backward(s, d);
    } else if (k == "cross_entropy") {
      DT_CHECK(p.ndim() == 2 && p.dtype() == dt::DType::F32 && t.dtype() == dt::DType::I32 && t.numel() == p.dim(0),
               "cross_entropy: pred must be f32 logits [N, V] and target i32 [N] (-1: ignored); got " +
                   dt::shape_str(p.shape()) + " and " + dt::shape_str(t.shape()));
      const int32_t* ids = t.data<int32_t>();
      for (int64_t i = 0; i < t.numel(); ++i)
        DT_CHECK(ids[i] == -1 || (ids[i] >= 0 && ids[i] < p.dim(1)),
                 "target[" + std::to_string(i) + "] = " + std::to_string(ids[i]) + "; accepted: -1 or 0 to " +
                     std::to_string(p.dim(1) - 1));
      dt::nn::CrossEntropyState s;
      *loss = dt::nn::cross_entropy_loss(p, t, -1, s);
      if (dpred) dt::nn::cross_entropy_loss_backward(p, t, -1, s, d);
    } else {
      dt::invalid("kind \"" + k + "\" is unknown; accepted: \"mse\", \"cross_entropy\"");
    }
    if (dpred) *dpred = handle_copy(d, dt::MemTag::Activation);
  });
}

dt_status dt_optimizer_step(dt_optimizer* optimizer) {
  return guard("dt_optimizer_step", [&] { need(optimizer, "optimizer")->opt->step(); });
}

dt_status dt_optimizer_set_lr(dt_optimizer* optimizer, double lr) {
  return guard("dt_optimizer_set_lr", [&] {
    need(optimizer, "optimizer");
    DT_CHECK(std::isfinite(lr) && lr >= 0, "lr = " + std::to_string(lr) + "; accepted: a finite number >= 0");
    optimizer->opt->set_lr(static_cast<float>(lr));
  });
}

}  // extern "C"
