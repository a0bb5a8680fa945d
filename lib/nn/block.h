// One pre-norm transformer block: r = x + attn(ln1(x)); y = r + mlp(ln2(r)).
// Parameters: <name>.ln1.*, <name>.attn.{qkv,proj}.*, <name>.ln2.*, <name>.mlp.{fc,proj}.*
#pragma once
#include "nn/attention.h"
#include "nn/config.h"

namespace dt::nn {

class TransformerBlock : public Module {
 public:
  struct Acts {
    Norm::Acts ln1, ln2;
    CausalSelfAttention::Acts attn;
    MLP::Acts mlp;
    Tensor r;       // x + attention
    Tensor dr, dh;  // backward scratch
  };
  // cfg must be validated and resolved. tp: attention heads and MLP features split over it.
  TransformerBlock(const std::string& name, const GPTConfig& cfg, TpGroup tp = {});
  void collect(ParamList& out) override;
  // x: [B, T, C], or under sequence parallelism this rank's token rows [B T / tp, C];
  // bt = {B, T}. y: the shape of x, written (allocated by the caller or ensure()).
  void forward(const Tensor& x, const Shape& bt, Acts& a, Tensor& y);
  // dy: gradient of y; dx overwritten. a must hold this block's forward of the same x.
  void backward(const Tensor& dy, Acts& a, Tensor& dx);
  Norm ln1;
  CausalSelfAttention attn;
  Norm ln2;
  MLP mlp;
};

}  // namespace dt::nn
