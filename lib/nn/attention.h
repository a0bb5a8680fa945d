// Causal self-attention, multi-head or grouped-query (n_kv_head divides n_head; n_kv_head ==
// n_head is plain multi-head). One fused projection "qkv" with weight
// [(n_head + 2 * n_kv_head) * head_dim, d_model]: rows for q, then k, then v. It is applied as
// three matmuls on row slices of that weight, so q, k and v come out as contiguous
// [B, T, H, D] tensors for the fused attention kernel without any copy. Optional RoPE on q
// and k; "proj" is the residual output projection.
#pragma once
#include "nn/layers.h"

namespace dt::nn {

struct AttentionConfig {
  int64_t d_model = 0, n_head = 0, n_kv_head = 0;
  bool rope = false;
  float rope_base = 10000.0f;
  bool bias = true;
  DType dtype = DType::F32;  // of the parameters (and so of the activations)
};

class CausalSelfAttention : public Module {
 public:
  struct Acts {
    Tensor x;                       // input [B, T, C] (shared with the caller)
    Tensor q, k, v, out, lse, y;    // q, k after RoPE; out [B, T, Hq, D]; y [B*T, C]
    Tensor dout, dq, dk, dv;        // backward scratch
  };
  CausalSelfAttention(const std::string& name, const AttentionConfig& cfg, uint64_t seed, float proj_std);
  void collect(ParamList& out) override;
  const Tensor& forward(const Tensor& x, Acts& a);
  void backward(const Tensor& dy, Acts& a, Tensor& dx);  // dx overwritten, shape of x
  AttentionConfig cfg;
  int64_t head_dim;
  Linear qkv, proj;
};

}  // namespace dt::nn
