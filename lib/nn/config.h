// Model configurations and their validation. A bad value is INVALID_ARGUMENT naming the
// field, its value and what is accepted.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "nn/layers.h"
#include "nn/rope.h"

namespace dt::nn {

// A range of blocks [begin, end) in the whole model's numbering.
struct BlockRange {
  int begin = 0, end = 0;
  bool operator==(const BlockRange& o) const { return begin == o.begin && end == o.end; }
};
// Whether block `layer` is in one of the ranges; an empty list holds every block.
inline bool holds_layer(const std::vector<BlockRange>& ranges, int64_t layer) {
  if (ranges.empty()) return true;
  for (const BlockRange& r : ranges)
    if (r.begin <= layer && layer < r.end) return true;
  return false;
}


enum class PosKind { Learned, RoPE };
const char* pos_name(PosKind p);

struct GPTConfig {
  int64_t vocab_size = 256;  // byte-level by default
  int64_t context = 256;     // longest sequence
  int64_t n_layer = 6;
  int64_t n_head = 6;
  int64_t n_kv_head = 0;     // 0: n_head (multi-head); fewer: grouped-query
  int64_t d_model = 384;
  int64_t d_ff = 0;          // 0: 4 * d_model
  NormKind norm = NormKind::LayerNorm;
  PosKind pos = PosKind::Learned;
  Act act = Act::GELU;
  bool tied_embeddings = true;  // lm_head reads wte.weight
  bool bias = true;             // biases on linears and LayerNorms (GPT-2); off for Llama style
  bool qkv_bias = false;        // biases on q, k and v alone when `bias` is off (Qwen2)
  float norm_eps = 1e-5f;
  float rope_base = 10000.0f;
  RopeScaling rope_scaling;     // frequency scaling for long contexts (Llama 3, linear)
  // Sliding-window attention (Mistral): each token sees the last `sliding_window` positions.
  // Within a context no longer than the window that is plain causal attention, so a model
  // with a window accepts only context <= sliding_window (validate() says so); 0: none.
  int64_t sliding_window = 0;
  // Mixture of experts (nn/moe.h, Mixtral style): n_experts > 0 replaces every block's MLP
  // by n_experts MLPs of its shape (d_ff, act, bias) and a router that sends each token to
  // top_k of them, their outputs summed weighted by the gates. 0: a dense MLP.
  int64_t n_experts = 0;
  int64_t top_k = 2;
  kernels::MoeGating moe_gating = kernels::MoeGating::Softmax;
  bool moe_renormalize = true;  // gates divided by the top-k scores' sum (Mixtral; Qwen2-MoE: off)
  float moe_aux_coef = 0.01f;   // load-balancing loss: coef * E * sum_e f_e P_e (Switch Transformer)
  float moe_z_coef = 0.001f;    // router z-loss: coef * mean over tokens of logsumexp(logits)^2 (ST-MoE)
  float moe_capacity = 0.0f;    // capacity factor (tokens an expert takes: factor * R * top_k / E); 0: dropless
  // A shared expert (Qwen2-MoE, DeepSeek): one more MLP, of width moe_shared_d_ff, that every
  // token goes through beside its top_k, its output added to theirs; with moe_shared_gate
  // scaled per token by sigmoid(x . w) first (Qwen2-MoE's shared_expert_gate). 0: none.
  int64_t moe_shared_d_ff = 0;
  bool moe_shared_gate = false;
  uint64_t seed = 1337;
  bool checkpoint = false;  // activation checkpointing per block
  // Storage of parameters, gradients, activations and the KV cache: f32, bf16 or f16 (math
  // is f32 in every kernel). bf16/f16 parameters are the f32 init rounded; the optimizer
  // keeps f32 masters, and the training engine loss-scales f16 (DESIGN §4).
  DType dtype = DType::F32;

  // Values with the 0 = default fields filled in.
  GPTConfig resolved() const;
  // The same shape with the Llama-style choices: RMSNorm, RoPE, SwiGLU, no biases, untied
  // embeddings (the defaults are GPT-2 style).
  GPTConfig llama_style() const {
    GPTConfig c = *this;
    c.norm = NormKind::RMSNorm;
    c.pos = PosKind::RoPE;
    c.act = Act::SwiGLU;
    c.bias = false;
    c.tied_embeddings = false;
    return c;
  }
  int64_t head_dim() const { return d_model / n_head; }
  bool moe() const { return n_experts > 0; }
  int64_t qkv_bias_elems() const { return bias || qkv_bias ? 1 : 0; }  // 1 when q, k, v have biases
  // Elements of every parameter tensor the GPT built from this config holds (what
  // dt_module_param_count reports), computed without building it. The one formula the C API,
  // the command line's memory checks and the checkpoint loader's size check all use; exact
  // in int64 for every config validate() accepts.
  int64_t param_count() const;
  // Elements of one block's shared expert and its gate (0 without one).
  int64_t shared_expert_params() const;
  // The elements one rank of a tensor-parallel group of `tp` holds (nn::GPT with a TpGroup:
  // heads, MLP features and vocabulary split, the vocabulary padded; every rank holds as
  // many), and in *replicated those it holds whole like every other tp rank (norms,
  // positions, row-parallel biases). tp = 1: param_count(). The formula
  // tests/multirank/tp_model_test.cc checks against the built parts.
  int64_t param_count(int64_t tp, int64_t* replicated) const;
  std::string str() const;
};

// Throws INVALID_ARGUMENT naming the first bad field.
void validate(const GPTConfig& c);

// Named starting points (dt_module_create_gpt's "preset"; explicit fields override them):
// "gpt-tiny" (2 layers, width 64, 2 heads, context 64: trains in milliseconds), "gpt-small"
// (the defaults above: 6 layers, width 384, 6 heads, context 256), "llama-tiny" (gpt-tiny,
// llama style), "mixtral-tiny" (llama-tiny with 4 experts of d_ff 128, top 2) and
// "qwen2-moe-tiny" (mixtral-tiny with q/k/v biases, the top-2 gates not renormalised, and a
// gated shared expert of width 128). Null for another name; gpt_preset_names lists them all.
const GPTConfig* gpt_preset(const std::string& name);
std::string gpt_preset_names();  // "\"gpt-small\", \"gpt-tiny\", ..."


enum class MLPAct { GELU, SiLU };

struct MLPConfig {
  std::vector<int64_t> sizes;  // {in, hidden..., out}: at least two
  MLPAct act = MLPAct::GELU;   // between layers, not after the last
  float init_std = 0.02f;
  uint64_t seed = 1337;
};

void validate(const MLPConfig& c);

}  // namespace dt::nn
