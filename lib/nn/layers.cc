#include "nn/layers.h"

#include "kernels/ops.h"

namespace dt::nn {

// ---- Linear ------------------------------------------------------------------------------
Linear::Linear(const std::string& name, int64_t in_, int64_t out_, bool has_bias, uint64_t seed, float std,
               DType dtype)
    : in(in_), out(out_) {
  weight = make_param(name + ".weight", {out, in}, Parameter::Init::Normal, std, seed, dtype);
  if (has_bias) bias = make_param(name + ".bias", {out}, Parameter::Init::Zeros, 0.0f, seed, dtype);
}

void Linear::collect(ParamList& list) {
  list.push_back(&weight);
  if (!bias.name.empty()) list.push_back(&bias);  // not value: ZeRO-3 releases values
}

void Linear::forward(const Tensor& x, Tensor& y) {
  ensure(y, {x.rows(), out}, x.dtype());
  linear_forward(flat2d(x), weight.value, bias.value, y);
}

void Linear::backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  Tensor dx2 = dx.defined() ? flat2d(dx) : Tensor();
  linear_backward(flat2d(dy), flat2d(x), weight.value, dx2, false, weight.grad, bias.grad);
}

// ---- Embedding ---------------------------------------------------------------------------
Embedding::Embedding(const std::string& name, int64_t num, int64_t dim, uint64_t seed, float std, DType dtype) {
  weight = make_param(name + ".weight", {num, dim}, Parameter::Init::Normal, std, seed, dtype);
}

void Embedding::collect(ParamList& list) { list.push_back(&weight); }

void Embedding::forward(const Tensor& ids, Tensor& out) {
  Shape s = ids.shape();
  s.push_back(weight.value.dim(1));
  ensure(out, s, weight.value.dtype());
  kernels::embedding_forward(ids, weight.value, out);
}

void Embedding::backward(const Tensor& ids, const Tensor& dout) { kernels::embedding_backward(ids, dout, weight.grad); }

// ---- Norm --------------------------------------------------------------------------------
const char* norm_name(NormKind k) { return k == NormKind::LayerNorm ? "layernorm" : "rmsnorm"; }

Norm::Norm(const std::string& name, int64_t dim, NormKind k, bool has_bias, float eps_, DType dtype)
    : kind(k), eps(eps_) {
  weight = make_param(name + ".weight", {dim}, Parameter::Init::Ones, 0.0f, 0, dtype);
  if (k == NormKind::LayerNorm && has_bias)
    bias = make_param(name + ".bias", {dim}, Parameter::Init::Zeros, 0.0f, 0, dtype);
}

void Norm::collect(ParamList& list) {
  list.push_back(&weight);
  if (!bias.name.empty()) list.push_back(&bias);  // not value: ZeRO-3 releases values
}

const Tensor& Norm::forward(const Tensor& x, Acts& a) {
  a.x = x;
  ensure(a.y, x.shape(), x.dtype());
  ensure(a.rstd, {x.rows()});
  if (kind == NormKind::LayerNorm) {
    ensure(a.mean, {x.rows()});
    kernels::layernorm_forward(x, weight.value, bias.value, eps, a.y, a.mean, a.rstd);
  } else {
    kernels::rmsnorm_forward(x, weight.value, eps, a.y, a.rstd);
  }
  return a.y;
}

void Norm::backward(const Tensor& dy, Acts& a, Tensor& dx) {
  ensure(dx, a.x.shape(), a.x.dtype());
  if (kind == NormKind::LayerNorm)
    kernels::layernorm_backward(dy, a.x, weight.value, a.mean, a.rstd, dx, weight.grad, bias.grad);
  else
    kernels::rmsnorm_backward(dy, a.x, weight.value, a.rstd, dx, weight.grad);
}

// ---- MLP ---------------------------------------------------------------------------------
const char* act_name(Act a) { return a == Act::GELU ? "gelu" : "swiglu"; }

MLP::MLP(const std::string& name, int64_t d_model, int64_t d_ff_, Act act_, bool bias, uint64_t seed, float proj_std,
         DType dtype, TpGroup tp_)
    : act(act_),
      d_ff(d_ff_ / tp_.size()),
      tp(tp_),
      fc(name + ".fc", d_model, act_ == Act::SwiGLU ? 2 * d_ff_ : d_ff_, bias, seed, 0.02f, dtype, tp_,
         act_ == Act::SwiGLU ? std::vector<int64_t>{d_ff_, d_ff_} : std::vector<int64_t>{}),
      proj(name + ".proj", d_ff_, d_model, bias, seed, proj_std, dtype, tp_) {}

void MLP::collect(ParamList& list) {
  fc.collect(list);
  proj.collect(list);
}

// The whole-token [R, C] shape of an MLP input (this rank's rows under SP).
Shape MLP::whole_rows(const Tensor& x) const { return {x.rows() * (tp.sp() ? tp.size() : 1), x.cols()}; }

const Tensor& MLP::forward(const Tensor& x_in, Acts& a) {
  a.x = x_in;
  const Tensor x = gather_tokens(tp, flat2d(x_in), whole_rows(a.x));
  const int64_t R = x.rows();
  const DType dt = x.dtype();
  if (act == Act::GELU) {
    // fc's bias goes in with the activation, in one pass; a.h keeps the product without it.
    fc.forward(x, a.h, /*with_bias=*/false);
    ensure(a.a, {R, d_ff}, dt);
    kernels::bias_gelu_forward(a.h, fc.bias.value, a.a);
  } else {
    // Two matmuls on row slices of the fused weight: gate and up come out contiguous.
    const Tensor& w = fc.weight.value;
    const Tensor& b = fc.bias.value;
    linear_forward(x, w.slice0(0, d_ff), rows_of(b, 0, d_ff), ensure(a.gate, {R, d_ff}, dt));
    linear_forward(x, w.slice0(d_ff, 2 * d_ff), rows_of(b, d_ff, 2 * d_ff), ensure(a.up, {R, d_ff}, dt));
    ensure(a.a, {R, d_ff}, dt);
    kernels::swiglu_forward(a.gate, a.up, a.a);
  }
  proj.forward(a.a, a.y);
  return a.y;
}

void MLP::backward(const Tensor& dy, Acts& a, Tensor& dx) {
  const Shape whole = whole_rows(a.x);
  const int64_t R = whole[0];
  const DType dt = a.x.dtype();
  ensure(a.da, {R, d_ff}, dt);
  proj.backward(a.a, flat2d(dy), a.da);
  // Under SP the input is gathered again (proj's backward has used the gathered buffer).
  const Tensor x = gather_tokens(tp, flat2d(a.x), whole);
  if (act == Act::GELU) {
    kernels::bias_gelu_backward(a.h, fc.bias.value, a.da, ensure(a.dh, {R, d_ff}, dt), fc.bias.grad);
    fc.backward(x, a.dh, dx, /*with_bias=*/false);
    return;
  }
  // Each rank's dx is its hidden features' share: summed over tp (column parallel).
  Tensor& part = partial_buffer(tp, whole, dt, dx);
  Tensor dx2 = flat2d(part);
  kernels::swiglu_backward(a.gate, a.up, a.da, ensure(a.dgate, {R, d_ff}, dt), ensure(a.dup, {R, d_ff}, dt));
  Tensor& w = fc.weight.value;
  Tensor& g = fc.weight.grad;
  Tensor gb = rows_of(fc.bias.grad, 0, d_ff), ub = rows_of(fc.bias.grad, d_ff, 2 * d_ff);
  Tensor gw = g.slice0(0, d_ff), uw = g.slice0(d_ff, 2 * d_ff);
  linear_backward(a.dgate, x, w.slice0(0, d_ff), dx2, false, gw, gb);
  linear_backward(a.dup, x, w.slice0(d_ff, 2 * d_ff), dx2, true, uw, ub);
  sum_partial(tp, part, dx);
}

}  // namespace dt::nn
