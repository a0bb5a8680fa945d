// A sequential container of the simple modules, for hosts that build their own network
// (dt_module_create_sequential): layers run in order and each forward keeps what its
// backward needs, for one batch in flight. Parameter names follow the layer's position, as
// PyTorch's nn.Sequential does: layer 2, a Linear, owns "2.weight" and "2.bias".
//
// Layers: Linear (in, out, with or without bias), GELU, SiLU, LayerNorm and RMSNorm (dim).
// Inputs are f32 [N, features]; the widths must chain (a Linear's in equals the width
// before it, a norm's dim too), which add_* checks as the network is built.
#pragma once
#include <memory>
#include <vector>

#include "nn/config.h"

namespace dt::nn {

class Sequential : public Module {
 public:
  explicit Sequential(uint64_t seed, float init_std = 0.02f) : seed_(seed), init_std_(init_std) {}
  void add_linear(int64_t in, int64_t out, bool bias);
  void add_activation(MLPAct act);
  void add_norm(NormKind kind, int64_t dim, float eps = 1e-5f);

  void collect(ParamList& out) override;
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  // The input width the first layer needs (0 while only activations are known).
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return width_; }

  // x: f32 [N, in_features] -> [N, out_features] (owned by the container; valid until the
  // next forward).
  const Tensor& forward(const Tensor& x);
  // From the gradient of the last forward's output: every parameter's grad += its
  // gradient; dx (when not null) receives the gradient of the input.
  void backward(const Tensor& dy, Tensor* dx);

 private:
  enum class Kind { Linear, Act, Norm };
  struct Layer {
    Kind kind = Kind::Linear;
    MLPAct act = MLPAct::GELU;
    std::unique_ptr<Linear> linear;
    std::unique_ptr<Norm> norm;
    Norm::Acts norm_acts;
    Tensor in, out, dout;  // the layer's input (a view), its output, backward scratch
  };
  void chain(int64_t in, int64_t out, const char* what);

  uint64_t seed_;
  float init_std_;
  int64_t in_ = 0, width_ = 0;  // the network's input width, and the width so far
  std::vector<Layer> layers_;
  bool ran_forward_ = false;
};

}  // namespace dt::nn
