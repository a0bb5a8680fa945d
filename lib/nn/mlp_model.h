// A plain multi-layer perceptron: Linear layers "layers.<i>" with biases and an activation
// between them (none after the last), for regression tests and small tasks.
#pragma once
#include <memory>
#include <vector>

#include "nn/config.h"

namespace dt::nn {

class MLPModel : public Module {
 public:
  struct Acts {
    std::vector<Tensor> z;  // z[i]: output of layer i (before its activation)
    std::vector<Tensor> h;  // h[0]: the input; h[i]: act(z[i-1]), the input of layer i
    Tensor dz, dh;          // backward scratch
  };
  explicit MLPModel(const MLPConfig& cfg);  // validates
  void collect(ParamList& out) override;
  const MLPConfig& config() const { return cfg_; }
  // x: [N, sizes.front()] -> [N, sizes.back()].
  const Tensor& forward(const Tensor& x, Acts& a);
  // dy: gradient of the output. dx (optional, may be null): gradient of the input.
  void backward(const Tensor& dy, Acts& a, Tensor* dx = nullptr);

 private:
  MLPConfig cfg_;
  std::vector<std::unique_ptr<Linear>> layers_;
};

}  // namespace dt::nn
