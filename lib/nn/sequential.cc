#include "nn/sequential.h"

#include "core/error.h"
#include "kernels/ops.h"

namespace dt::nn {

void Sequential::chain(int64_t in, int64_t out, const char* what) {
  const std::string at = "layer " + std::to_string(layers_.size()) + " (" + what + ")";
  DT_CHECK(in >= 1 && out >= 1, at + ": sizes " + std::to_string(in) + ", " + std::to_string(out) + "; accepted: >= 1");
  DT_CHECK(width_ == 0 || in == width_, at + " takes width " + std::to_string(in) + " but the layers before it give " +
                                            std::to_string(width_));
  if (width_ == 0) in_ = in;
  width_ = out;
}

void Sequential::add_linear(int64_t in, int64_t out, bool bias) {
  chain(in, out, "linear");
  Layer l;
  l.kind = Kind::Linear;
  l.linear = std::make_unique<Linear>(std::to_string(layers_.size()), in, out, bias, seed_, init_std_);
  layers_.push_back(std::move(l));
}

void Sequential::add_activation(MLPAct act) {
  Layer l;
  l.kind = Kind::Act;
  l.act = act;
  layers_.push_back(std::move(l));
}

void Sequential::add_norm(NormKind kind, int64_t dim, float eps) {
  chain(dim, dim, kind == NormKind::LayerNorm ? "layernorm" : "rmsnorm");
  DT_CHECK(eps >= 0, "layer " + std::to_string(layers_.size()) + ": eps must be >= 0");
  Layer l;
  l.kind = Kind::Norm;
  l.norm = std::make_unique<Norm>(std::to_string(layers_.size()), dim, kind, /*bias=*/true, eps);
  layers_.push_back(std::move(l));
}

void Sequential::collect(ParamList& list) {
  for (Layer& l : layers_) {
    if (l.linear) l.linear->collect(list);
    if (l.norm) l.norm->collect(list);
  }
}

const Tensor& Sequential::forward(const Tensor& x) {
  DT_CHECK(!layers_.empty() && width_ > 0, "Sequential: no layer with a width (add a linear or a norm)");
  DT_CHECK(x.defined() && x.dtype() == DType::F32 && x.ndim() == 2 && x.dim(1) == in_,
           "x: expected f32 [N, " + std::to_string(in_) + "], got " +
               (x.defined() ? std::string(dtype_name(x.dtype())) + " " + shape_str(x.shape()) : "undefined"));
  Tensor cur = x;
  for (Layer& l : layers_) {
    l.in = cur;
    switch (l.kind) {
      case Kind::Linear: l.linear->forward(cur, l.out); break;
      case Kind::Norm: l.out = l.norm->forward(cur, l.norm_acts); break;
      case Kind::Act:
        ensure(l.out, cur.shape());
        if (l.act == MLPAct::GELU)
          kernels::gelu_forward(cur, l.out);
        else
          kernels::silu_forward(cur, l.out);
        break;
    }
    cur = l.out;
  }
  ran_forward_ = true;
  return layers_.back().out;
}

void Sequential::backward(const Tensor& dy, Tensor* dx) {
  DT_CHECK(ran_forward_, "Sequential::backward: no forward to differentiate; call forward first");
  const Tensor& y = layers_.back().out;
  DT_CHECK(dy.defined() && dy.dtype() == DType::F32 && dy.shape() == y.shape(),
           "dy: expected f32 " + shape_str(y.shape()) + " (the last forward's output), got " +
               (dy.defined() ? std::string(dtype_name(dy.dtype())) + " " + shape_str(dy.shape()) : "undefined"));
  Tensor g = dy;  // gradient of the current layer's output
  for (size_t i = layers_.size(); i-- > 0;) {
    Layer& l = layers_[i];
    // The first layer writes straight into dx (or skips the input gradient when none is
    // wanted); the others into their own scratch, which the layer before then reads.
    Tensor none;
    Tensor& gin = i == 0 ? (dx ? ensure(*dx, l.in.shape()) : none) : ensure(l.dout, l.in.shape());
    switch (l.kind) {
      case Kind::Linear: l.linear->backward(l.in, g, gin); break;
      case Kind::Norm:
        if (!gin.defined()) ensure(gin, l.in.shape());  // norm backward always computes dx
        l.norm->backward(g, l.norm_acts, gin);
        break;
      case Kind::Act:
        if (!gin.defined()) break;  // nothing before it to feed
        if (l.act == MLPAct::GELU)
          kernels::gelu_backward(l.in, g, gin);
        else
          kernels::silu_backward(l.in, g, gin);
        break;
    }
    g = gin;
  }
}

}  // namespace dt::nn
