// One pre-norm transformer block: r = x + attn(ln1(x)); y = r + ffn(ln2(r)), the feed-forward
// a dense MLP or a mixture of experts.
// Parameters: <name>.ln1.*, <name>.attn.{qkv,proj}.*, <name>.ln2.*, and <name>.mlp.{fc,proj}.*
// or, with experts (cfg.n_experts > 0, nn/moe.h), <name>.moe.{router,experts.<e>.*}.
#pragma once
#include "nn/attention.h"
#include "nn/config.h"
#include "nn/moe.h"

namespace dt::nn {

class TransformerBlock : public Module {
 public:
  struct Acts {
    Norm::Acts ln1, ln2;
    CausalSelfAttention::Acts attn;
    FeedForward::Acts ffn;
    Tensor r;       // x + attention
    Tensor dr, dh;  // backward scratch
  };
  // cfg must be validated and resolved. tp: attention heads and MLP features split over it.
  // ep: its experts split over it (a mixture of experts, nn/moe.h). cp: the sequence split
  // over it (ring attention, nn/ring_attention.h).
  TransformerBlock(const std::string& name, const GPTConfig& cfg, TpGroup tp = {}, EpGroup ep = {}, CpGroup cp = {});
  void collect(ParamList& out) override;
  // x: [B, T, C], or under sequence parallelism this rank's token rows [B T / tp, C];
  // bt = {B, T}. y: the shape of x, written (allocated by the caller or ensure()).
  void forward(const Tensor& x, const Shape& bt, Acts& a, Tensor& y);
  // dy: gradient of y; dx overwritten. a must hold this block's forward of the same x.
  // grad_scale: the micro-batch's share of the objective, for the experts' auxiliary losses.
  void backward(const Tensor& dy, Acts& a, Tensor& dx, float grad_scale = 1.0f);
  Norm ln1;
  CausalSelfAttention attn;
  Norm ln2;
  FeedForward ffn;
};

}  // namespace dt::nn
