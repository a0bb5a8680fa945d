#include "io/model_config.h"

#include "core/error.h"

namespace dt::io {
namespace {
using json = nlohmann::json;
}  // namespace

json config_to_json(const nn::GPTConfig& raw) {
  const nn::GPTConfig c = raw.resolved();
  json j = {{"vocab_size", c.vocab_size},
          {"context", c.context},
          {"n_layer", c.n_layer},
          {"n_head", c.n_head},
          {"n_kv_head", c.n_kv_head},
          {"d_model", c.d_model},
          {"d_ff", c.d_ff},
          {"norm", nn::norm_name(c.norm)},
          {"pos", nn::pos_name(c.pos)},
          {"act", nn::act_name(c.act)},
          {"tied_embeddings", c.tied_embeddings},
          {"bias", c.bias},
          {"precision", dtype_name(c.dtype)},
          {"seed", c.seed}};
  // What the Hugging Face architectures add, written only when it differs from the default,
  // so the configs (and checkpoints) of earlier models read and compare as they always did.
  const nn::GPTConfig d;
  if (c.qkv_bias && !c.bias) j["qkv_bias"] = true;
  if (c.norm_eps != d.norm_eps) j["norm_eps"] = c.norm_eps;
  if (c.rope_base != d.rope_base) j["rope_base"] = c.rope_base;
  if (c.sliding_window != 0) j["sliding_window"] = c.sliding_window;
  if (c.moe())
    j["moe"] = {{"experts", c.n_experts}, {"top_k", c.top_k}, {"gating", kernels::moe_gating_name(c.moe_gating)},
                {"renormalize", c.moe_renormalize}, {"aux_coef", c.moe_aux_coef}, {"z_coef", c.moe_z_coef},
                {"capacity", c.moe_capacity}};
  if (c.moe() && c.moe_shared_d_ff) j["moe"].update({{"shared_d_ff", c.moe_shared_d_ff}, {"shared_gate", c.moe_shared_gate}});
  const nn::RopeScaling& rs = c.rope_scaling;
  if (rs.kind != nn::RopeScalingKind::None)
    j["rope_scaling"] = {{"type", nn::rope_scaling_name(rs.kind)}, {"factor", rs.factor},
                         {"low_freq_factor", rs.low_freq_factor}, {"high_freq_factor", rs.high_freq_factor},
                         {"original_context", rs.original_context}};
  return j;
}

namespace {

[[noreturn]] void bad(const std::string& where, const std::string& key, const char* wanted) {
  fail(DT_ERR_IO, where + ": model config key \"" + key + "\" is missing or not " + wanted);
}

int64_t int_of(const json& j, const std::string& where, const char* key) {
  if (!j.contains(key) || !j[key].is_number_integer()) bad(where, key, "an integer");
  return j[key].get<int64_t>();
}

std::string str_of(const json& j, const std::string& where, const char* key) {
  if (!j.contains(key) || !j[key].is_string()) bad(where, key, "a string");
  return j[key].get<std::string>();
}

bool bool_of(const json& j, const std::string& where, const char* key) {
  if (!j.contains(key) || !j[key].is_boolean()) bad(where, key, "a boolean");
  return j[key].get<bool>();
}

// One of `names`, or DT_ERR_IO listing them.
template <class E>
E one_of(const json& j, const std::string& where, const char* key, std::initializer_list<std::pair<const char*, E>> names) {
  const std::string v = str_of(j, where, key);
  std::string accepted;
  for (const auto& [n, e] : names) {
    if (v == n) return e;
    accepted += std::string(accepted.empty() ? "" : ", ") + "\"" + n + "\"";
  }
  fail(DT_ERR_IO, where + ": model config \"" + key + "\" = \"" + v + "\"; accepted: " + accepted);
}

}  // namespace

nn::GPTConfig config_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) fail(DT_ERR_IO, where + ": the model config is not a JSON object");
  nn::GPTConfig c;
  c.vocab_size = int_of(j, where, "vocab_size");
  c.context = int_of(j, where, "context");
  c.n_layer = int_of(j, where, "n_layer");
  c.n_head = int_of(j, where, "n_head");
  c.n_kv_head = int_of(j, where, "n_kv_head");
  c.d_model = int_of(j, where, "d_model");
  c.d_ff = int_of(j, where, "d_ff");
  c.norm = one_of<nn::NormKind>(j, where, "norm", {{"layernorm", nn::NormKind::LayerNorm}, {"rmsnorm", nn::NormKind::RMSNorm}});
  c.pos = one_of<nn::PosKind>(j, where, "pos", {{"learned", nn::PosKind::Learned}, {"rope", nn::PosKind::RoPE}});
  c.act = one_of<nn::Act>(j, where, "act", {{"gelu", nn::Act::GELU}, {"swiglu", nn::Act::SwiGLU}});
  c.tied_embeddings = bool_of(j, where, "tied_embeddings");
  c.bias = bool_of(j, where, "bias");
  c.dtype = one_of<DType>(j, where, "precision", {{"f32", DType::F32}, {"bf16", DType::BF16}, {"f16", DType::F16}});
  c.seed = static_cast<uint64_t>(int_of(j, where, "seed"));
  // The optional keys (config_to_json writes them when not the default).
  const auto number = [&](const json& o, const char* key, float fallback) {
    if (!o.contains(key)) return fallback;
    if (!o[key].is_number()) bad(where, key, "a number");
    return o[key].get<float>();
  };
  if (j.contains("qkv_bias")) c.qkv_bias = bool_of(j, where, "qkv_bias");
  c.norm_eps = number(j, "norm_eps", c.norm_eps);
  c.rope_base = number(j, "rope_base", c.rope_base);
  if (j.contains("sliding_window")) c.sliding_window = int_of(j, where, "sliding_window");
  if (j.contains("moe")) {
    const json& m = j["moe"];
    if (!m.is_object()) bad(where, "moe", "an object");
    c.n_experts = int_of(m, where, "experts");
    c.top_k = int_of(m, where, "top_k");
    c.moe_gating = one_of<kernels::MoeGating>(m, where, "gating", {{"softmax", kernels::MoeGating::Softmax},
                                                                    {"sigmoid", kernels::MoeGating::Sigmoid}});
    c.moe_renormalize = bool_of(m, where, "renormalize");
    c.moe_aux_coef = number(m, "aux_coef", c.moe_aux_coef);
    c.moe_z_coef = number(m, "z_coef", c.moe_z_coef);
    c.moe_capacity = number(m, "capacity", c.moe_capacity);
    if (m.contains("shared_d_ff")) c.moe_shared_d_ff = int_of(m, where, "shared_d_ff");
    if (m.contains("shared_gate")) c.moe_shared_gate = bool_of(m, where, "shared_gate");
  }
  if (j.contains("rope_scaling")) {
    const json& r = j["rope_scaling"];
    if (!r.is_object()) bad(where, "rope_scaling", "an object");
    nn::RopeScaling& rs = c.rope_scaling;
    rs.kind = one_of<nn::RopeScalingKind>(r, where, "type", {{"none", nn::RopeScalingKind::None},
                                                              {"linear", nn::RopeScalingKind::Linear},
                                                              {"llama3", nn::RopeScalingKind::Llama3}});
    rs.factor = number(r, "factor", rs.factor);
    rs.low_freq_factor = number(r, "low_freq_factor", rs.low_freq_factor);
    rs.high_freq_factor = number(r, "high_freq_factor", rs.high_freq_factor);
    if (r.contains("original_context")) rs.original_context = int_of(r, where, "original_context");
  }
  try {
    nn::validate(c);
  } catch (const Error& e) {
    fail(DT_ERR_IO, where + ": the saved model config is invalid: " + e.what());
  }
  return c;
}

double config_min_checkpoint_bytes(const nn::GPTConfig& c) {
  return static_cast<double>(c.param_count()) * static_cast<double>(dtype_size(c.dtype));
}

std::string config_mismatch(const json& saved, const nn::GPTConfig& model) {
  const json mine = config_to_json(model);
  for (const auto& [key, value] : mine.items()) {
    if (key == "seed") continue;
    if (!saved.is_object() || !saved.contains(key))
      return "the checkpoint's model config has no \"" + key + "\" (this model: " + value.dump() + ")";
    if (saved[key] != value)
      return "model config \"" + key + "\": checkpoint " + saved[key].dump() + ", this model " + value.dump();
  }
  if (saved.is_object())  // an optional key the checkpoint has and this model leaves at its default
    for (const auto& [key, value] : saved.items())
      if (key != "seed" && !mine.contains(key))
        return "model config \"" + key + "\": checkpoint " + value.dump() + ", this model the default";
  return "";
}

}  // namespace dt::io
