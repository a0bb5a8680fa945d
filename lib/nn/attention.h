// Causal self-attention, multi-head or grouped-query (n_kv_head divides n_head; n_kv_head ==
// n_head is plain multi-head). One fused projection "qkv" with weight
// [(n_head + 2 * n_kv_head) * head_dim, d_model]: rows for q, then k, then v. It is applied as
// three matmuls on row slices of that weight, so q, k and v come out as contiguous
// [B, T, H, D] tensors for the fused attention kernel without any copy. Optional RoPE on q
// and k; "proj" is the residual output projection.
//
// Tensor parallel (cfg.tp of size N > 1): heads split over tp, each rank holding n_head / N
// query heads and n_kv_head / N KV heads, or, with fewer KV heads than ranks (N a multiple
// of n_kv_head), the one KV head its query heads read, held by N / n_kv_head ranks whose
// K and V weight gradients are summed over them: qkv is column parallel (its q, k and v
// parts each split, ShardSpec::segments and segment_replicas) and proj row parallel, so a
// block's attention costs one
// all-reduce forward and one backward (nn/tensor_parallel.h); under sequence parallelism an
// all-gather of the input tokens and a reduce-scatter of the output instead, forward, and
// the reverse backward.
//
// Context parallel (cfg.cp of size N > 1): the layer sees this rank's two chunks of every
// sequence (nn/ring_attention.h); RoPE turns each row by its global position and the
// attention runs round the cp ring. Everything else is per token.
#pragma once
#include "nn/layers.h"
#include "nn/ring_attention.h"
#include "nn/rope.h"
#include "nn/tensor_parallel.h"

namespace dt::nn {

struct AttentionConfig {
  int64_t d_model = 0, n_head = 0, n_kv_head = 0;
  bool rope = false;
  RopeSpec rope_spec;
  bool bias = true;       // on the output projection
  bool qkv_bias = true;   // on q, k and v (Qwen2 has these alone)
  DType dtype = DType::F32;  // of the parameters (and so of the activations)
  TpGroup tp;                // heads split over it (n_head and n_kv_head must divide by its size)
  CpGroup cp;                // the sequence split over it: ring attention (nn/ring_attention.h)
};

class CausalSelfAttention : public Module {
 public:
  struct Acts {
    Tensor x;                       // input as given (under SP this rank's tokens), shared
    Tensor q, k, v, out, lse, y;    // q, k after RoPE; out [B, T, Hq, D]; y [B*T, C]
    Tensor dout, dq, dk, dv;        // backward scratch
    Tensor kv_sum;                  // KV heads held by several ranks: their gradients' sum
  };
  CausalSelfAttention(const std::string& name, const AttentionConfig& cfg, uint64_t seed, float proj_std);
  void collect(ParamList& out) override;
  // x: [B, T, C], or under sequence parallelism this rank's token rows of it; bt = {B, T}.
  // Returns y: [B T, C] (under SP this rank's rows).
  const Tensor& forward(const Tensor& x, const Shape& bt, Acts& a);
  void backward(const Tensor& dy, Acts& a, Tensor& dx);  // dx overwritten, shape of x
  AttentionConfig cfg;          // the whole layer's
  int64_t head_dim, hq, kv_rep, hkv;  // hq, hkv: this rank's query and KV heads; kv_rep: the
                                      // ranks holding each KV head (n_kv_head < tp: tp / n_kv_head)
  ColumnParallelLinear qkv;
  RowParallelLinear proj;

 private:
  int64_t kv_slot() const;
  void zero_kv_slots(Acts& a);
  Tensor kv_grad_rows(Acts& a, int which, bool bias);  // which: 0 k, 1 v
  void sum_shared_kv_grads(Acts& a);
};

// Inference (gpt_cached.cc, gpt_paged.cc): x [B, T, d_model] through the fused qkv weight's
// row slices into q [B, T, Hq, D], k and v [B, T, Hkv, D] (this rank's heads; no RoPE yet).
void project_qkv(CausalSelfAttention& at, const Tensor& x, Tensor& q, Tensor& k, Tensor& v);

}  // namespace dt::nn
