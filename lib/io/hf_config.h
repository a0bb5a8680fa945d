// A Hugging Face model directory's config.json and generation_config.json, in libdtrain's
// words (nn::GPTConfig) and back.
//
// Architectures (config.json "architectures"[0]); anything else is refused by name with
// this list:
//   GPT2LMHeadModel     LayerNorm with biases, learned positions, GELU (tanh: "gelu_new"),
//                       biases everywhere, tied head; Conv1D weights stored [in, out].
//   LlamaForCausalLM    RMSNorm, RoPE (rope_theta; rope scaling "linear" or "llama3"),
//                       SwiGLU, GQA, no biases, tied or untied head.
//   Qwen2ForCausalLM    as Llama, with biases on q, k and v.
//   MistralForCausalLM  as Llama, with a sliding window: the context is capped at the
//                       window (attention beyond it is refused, nn/config.h).
//   MixtralForCausalLM  as Mistral, every MLP a mixture of experts (softmax, top-k
//                       renormalised).
//   Qwen2MoeForCausalLM as Qwen2, every MLP a mixture of experts of moe_intermediate_size
//                       (softmax; top-k renormalised only with norm_topk_prob) plus a
//                       shared expert behind a sigmoid gate (decoder_sparse_step 1 and
//                       empty mlp_only_layers; other layouts refused by name).
// Both spellings of the rope settings are read: transformers 4.x's "rope_theta" and
// "rope_scaling", and 5.x's "rope_parameters". Every other setting that would change the
// model's function and is not what libdtrain computes is refused naming the key and the
// value (an activation other than the architecture's, an explicit head_dim that is not
// hidden_size / heads, attention or MLP biases on Llama, ...).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nn/config.h"

namespace dt::io {

struct HfModelConfig {
  std::string architecture;          // "LlamaForCausalLM", ...
  nn::GPTConfig gpt;                 // dtype: the stored weights' (config "torch_dtype"/"dtype"; f32 if absent)
  int64_t max_positions = 0;         // max_position_embeddings / n_positions
  int32_t bos_token_id = -1;         // -1: none
  std::vector<int32_t> eos_token_ids;  // generation_config.json's when present, else config.json's
};

// The architectures accepted, as one comma-separated list (for messages and --help).
std::string hf_architectures();

// Parses `config` (config.json's text, from `where`) and, when not null, generation_config
// (its text, for the token ids). DT_ERR_IO for malformed JSON or a missing or mistyped key;
// DT_ERR_INVALID_ARGUMENT for an architecture or setting libdtrain does not compute, naming it.
HfModelConfig hf_config_from_json(const nlohmann::json& config, const nlohmann::json* generation,
                                  const std::string& where);

// The architecture a libdtrain config is an instance of ("" with the reason in *why when none).
std::string hf_architecture_of(const nn::GPTConfig& c, std::string* why = nullptr);

// config.json for `c` as architecture `arch` (transformers 4.x spelling, which 5.x also reads),
// the weights stored as `stored`; and generation_config.json.
nlohmann::json hf_config_to_json(const nn::GPTConfig& c, const std::string& arch, DType stored, int32_t bos,
                                 const std::vector<int32_t>& eos);
nlohmann::json hf_generation_config_json(int32_t bos, const std::vector<int32_t>& eos);

}  // namespace dt::io
