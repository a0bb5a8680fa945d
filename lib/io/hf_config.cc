#include "io/hf_config.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace dt::io {
namespace {

using json = nlohmann::json;

enum class Family { GPT2, Llama, Qwen2, Mistral, Mixtral, Qwen2Moe };
struct Arch {
  const char* name;
  const char* model_type;
  Family family;
};
// The one list of architectures: parsing, export and messages all read it.
constexpr Arch kArchs[] = {{"GPT2LMHeadModel", "gpt2", Family::GPT2},
                           {"LlamaForCausalLM", "llama", Family::Llama},
                           {"Qwen2ForCausalLM", "qwen2", Family::Qwen2},
                           {"MistralForCausalLM", "mistral", Family::Mistral},
                           {"MixtralForCausalLM", "mixtral", Family::Mixtral},
                           {"Qwen2MoeForCausalLM", "qwen2_moe", Family::Qwen2Moe}};

const Arch* find_arch(const std::string& name) {
  for (const Arch& a : kArchs)
    if (name == a.name) return &a;
  return nullptr;
}

struct Reader {
  const json& j;
  const std::string& where;
  [[noreturn]] void bad(const std::string& key, const std::string& what) const {
    fail(DT_ERR_IO, where + ": \"" + key + "\" " + what);
  }
  bool has(const char* key) const { return j.contains(key) && !j[key].is_null(); }
  int64_t integer(const char* key) const {
    if (!has(key) || !j[key].is_number_integer()) bad(key, "is missing or not an integer");
    return j[key].get<int64_t>();
  }
  int64_t integer(const char* key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
  double number(const json& o, const char* key, double fallback) const {
    if (!o.contains(key) || o[key].is_null()) return fallback;
    if (!o[key].is_number()) bad(key, "is not a number");
    return o[key].get<double>();
  }
  double number(const char* key, double fallback) const { return number(j, key, fallback); }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j[key].is_boolean()) bad(key, "is not a boolean");
    return j[key].get<bool>();
  }
  std::string string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j[key].is_string()) bad(key, "is not a string");
    return j[key].get<std::string>();
  }
};

[[noreturn]] void unsupported(const std::string& where, const std::string& key, const std::string& value,
                              const std::string& accepted) {
  invalid(where + ": \"" + key + "\" = " + value + " is not supported; accepted: " + accepted);
}

// Token ids: an integer, a list of them, or null.
std::vector<int32_t> ids_of(const json& v, const std::string& where, const char* key) {
  std::vector<int32_t> out;
  if (v.is_null()) return out;
  auto one = [&](const json& x) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > (int64_t(1) << 30))
      fail(DT_ERR_IO, where + ": \"" + key + "\" holds " + x.dump() + "; accepted: token ids >= 0");
    out.push_back(static_cast<int32_t>(x.get<int64_t>()));
  };
  if (v.is_array()) {
    if (v.size() > 1024) fail(DT_ERR_IO, where + ": \"" + key + "\" lists " + std::to_string(v.size()) + " ids");
    for (const json& x : v) one(x);
  } else {
    one(v);
  }
  return out;
}

DType stored_dtype(const Reader& r) {
  const std::string d = r.has("torch_dtype") ? r.string("torch_dtype", "") : r.string("dtype", "float32");
  if (d == "float32") return DType::F32;
  if (d == "bfloat16") return DType::BF16;
  if (d == "float16") return DType::F16;
  unsupported(r.where, "torch_dtype", "\"" + d + "\"", "\"float32\", \"bfloat16\", \"float16\"");
}

void read_rope(const Reader& r, nn::GPTConfig& c) {
  // 5.x: "rope_parameters" holds rope_theta and the scaling; 4.x: "rope_theta" + "rope_scaling".
  const json none = json::object();
  const json& params = r.has("rope_parameters") ? r.j["rope_parameters"] : none;
  if (!params.is_object()) r.bad("rope_parameters", "is not an object");
  c.rope_base = static_cast<float>(r.number(params, "rope_theta", r.number("rope_theta", 10000.0)));
  const json& scaling = r.has("rope_parameters") ? params : (r.has("rope_scaling") ? r.j["rope_scaling"] : none);
  if (!scaling.is_object()) r.bad("rope_scaling", "is not an object");
  std::string type = "default";
  for (const char* key : {"rope_type", "type"})
    if (scaling.contains(key) && scaling[key].is_string()) type = scaling[key].get<std::string>();
  nn::RopeScaling& s = c.rope_scaling;
  if (type == "default") return;
  if (type == "linear") {
    s.kind = nn::RopeScalingKind::Linear;
  } else if (type == "llama3") {
    s.kind = nn::RopeScalingKind::Llama3;
    s.low_freq_factor = static_cast<float>(r.number(scaling, "low_freq_factor", 1.0));
    s.high_freq_factor = static_cast<float>(r.number(scaling, "high_freq_factor", 4.0));
    const double orig = r.number(scaling, "original_max_position_embeddings", 8192.0);
    if (!(orig >= 1 && orig <= double(int64_t(1) << 30)))
      r.bad("original_max_position_embeddings", "is out of range");
    s.original_context = static_cast<int64_t>(orig);
  } else {
    unsupported(r.where, "rope_type", "\"" + type + "\"", "\"default\", \"linear\", \"llama3\"");
  }
  s.factor = static_cast<float>(r.number(scaling, "factor", 1.0));
}

void gpt2_config(const Reader& r, nn::GPTConfig& c, int64_t& max_positions) {
  c.vocab_size = r.integer("vocab_size");
  max_positions = r.integer("n_positions");
  c.context = max_positions;
  c.d_model = r.integer("n_embd");
  c.n_layer = r.integer("n_layer");
  c.n_head = r.integer("n_head");
  c.d_ff = r.integer("n_inner", 0);
  const std::string act = r.string("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    unsupported(r.where, "activation_function", "\"" + act + "\"", "\"gelu_new\", \"gelu_pytorch_tanh\"");
  c.norm_eps = static_cast<float>(r.number("layer_norm_epsilon", 1e-5));
  if (r.boolean("scale_attn_by_inverse_layer_idx", false))
    unsupported(r.where, "scale_attn_by_inverse_layer_idx", "true", "false");
  if (!r.boolean("scale_attn_weights", true)) unsupported(r.where, "scale_attn_weights", "false", "true");
  if (!r.boolean("tie_word_embeddings", true)) unsupported(r.where, "tie_word_embeddings", "false", "true");
  // GPT-2 style is GPTConfig's default: LayerNorm, learned positions, GELU, biases, tied.
}

// Qwen2-MoE's feed-forward: every layer a mixture of experts of moe_intermediate_size (the
// dense intermediate_size is then unused), softmax gates renormalised only with
// norm_topk_prob, and a shared expert behind a sigmoid gate.
void qwen2_moe_config(const Reader& r, nn::GPTConfig& c) {
  c.n_experts = r.integer("num_experts");
  if (c.n_experts < 1) unsupported(r.where, "num_experts", std::to_string(c.n_experts), ">= 1 (a dense model is a Qwen2ForCausalLM)");
  c.top_k = r.integer("num_experts_per_tok");
  c.d_ff = r.integer("moe_intermediate_size");
  c.moe_shared_d_ff = r.integer("shared_expert_intermediate_size");
  if (c.moe_shared_d_ff < 1) r.bad("shared_expert_intermediate_size", "must be >= 1");
  c.moe_shared_gate = true;
  c.moe_renormalize = r.boolean("norm_topk_prob", false);
  c.moe_aux_coef = static_cast<float>(r.number("router_aux_loss_coef", 0.001));
  c.moe_z_coef = 0.0f;
  if (r.integer("decoder_sparse_step", 1) != 1)
    unsupported(r.where, "decoder_sparse_step", std::to_string(r.integer("decoder_sparse_step", 1)),
                "1 (every layer a mixture of experts)");
  if (r.has("mlp_only_layers") && (!r.j["mlp_only_layers"].is_array() || !r.j["mlp_only_layers"].empty()))
    unsupported(r.where, "mlp_only_layers", r.j["mlp_only_layers"].dump(), "[] (every layer a mixture of experts)");
}

void llama_config(const Reader& r, Family f, nn::GPTConfig& c, int64_t& max_positions) {
  c = c.llama_style();
  c.vocab_size = r.integer("vocab_size");
  c.d_model = r.integer("hidden_size");
  c.d_ff = r.integer("intermediate_size");
  c.n_layer = r.integer("num_hidden_layers");
  c.n_head = r.integer("num_attention_heads");
  c.n_kv_head = r.integer("num_key_value_heads", c.n_head);
  max_positions = r.integer("max_position_embeddings");
  c.context = max_positions;
  c.norm_eps = static_cast<float>(r.number("rms_norm_eps", 1e-6));
  c.tied_embeddings = r.boolean("tie_word_embeddings", false);
  const std::string act = r.string("hidden_act", "silu");
  if (act != "silu") unsupported(r.where, "hidden_act", "\"" + act + "\"", "\"silu\"");
  if (c.n_head > 0 && r.has("head_dim") && r.integer("head_dim") * c.n_head != c.d_model)
    unsupported(r.where, "head_dim", std::to_string(r.integer("head_dim")),
                "hidden_size / num_attention_heads = " + std::to_string(c.d_model / c.n_head));
  if (f == Family::Llama) {
    if (r.boolean("attention_bias", false)) unsupported(r.where, "attention_bias", "true", "false");
    if (r.boolean("mlp_bias", false)) unsupported(r.where, "mlp_bias", "true", "false");
    if (r.integer("pretraining_tp", 1) != 1)
      unsupported(r.where, "pretraining_tp", std::to_string(r.integer("pretraining_tp", 1)), "1");
  }
  if (f == Family::Qwen2 || f == Family::Qwen2Moe) {
    c.qkv_bias = f == Family::Qwen2 || r.boolean("qkv_bias", true);
    if (r.boolean("use_sliding_window", false)) unsupported(r.where, "use_sliding_window", "true", "false");
  }
  if (f == Family::Qwen2Moe) qwen2_moe_config(r, c);
  if (f == Family::Mixtral) {  // Mistral's attention, a mixture of experts (softmax, top-k renormalised)
    c.n_experts = r.integer("num_local_experts");
    c.top_k = r.integer("num_experts_per_tok");
    c.moe_aux_coef = static_cast<float>(r.number("router_aux_loss_coef", 0.001));
    c.moe_z_coef = 0.0f;  // Mixtral trains without a z-loss
    if (r.number("router_jitter_noise", 0.0) != 0.0)
      unsupported(r.where, "router_jitter_noise", std::to_string(r.number("router_jitter_noise", 0.0)), "0");
  }
  if ((f == Family::Mistral || f == Family::Mixtral) && r.has("sliding_window")) {
    c.sliding_window = r.integer("sliding_window");
    if (c.sliding_window < 1) r.bad("sliding_window", "must be >= 1 or null");
    c.context = std::min(c.context, c.sliding_window);
  }
  read_rope(r, c);
}

// A float as the shortest decimal that reads back as the same float (1e-06, not
// 9.999999974752427e-07): what a person wrote in the config, and what float() gives back.
json short_float(float v) {
  char buf[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return std::strtod(buf, nullptr);
}

}  // namespace

std::string hf_architectures() {
  std::string s;
  for (const Arch& a : kArchs) s += std::string(s.empty() ? "" : ", ") + a.name;
  return s;
}

HfModelConfig hf_config_from_json(const json& j, const json* generation, const std::string& where) {
  if (!j.is_object()) fail(DT_ERR_IO, where + ": not a JSON object");
  const Reader r{j, where};
  if (!r.has("architectures") || !j["architectures"].is_array() || j["architectures"].empty() ||
      !j["architectures"][0].is_string())
    fail(DT_ERR_IO, where + ": \"architectures\" is missing or not a list of names; accepted: one of " +
                        hf_architectures());
  HfModelConfig out;
  out.architecture = j["architectures"][0].get<std::string>();
  const Arch* arch = find_arch(out.architecture);
  if (!arch)
    invalid(where + ": architecture \"" + out.architecture + "\" is not supported; accepted: " + hf_architectures());
  nn::GPTConfig& c = out.gpt;
  if (arch->family == Family::GPT2) gpt2_config(r, c, out.max_positions);
  else llama_config(r, arch->family, c, out.max_positions);
  c.dtype = stored_dtype(r);
  try {
    nn::validate(c);
  } catch (const Error& e) {
    invalid(where + ": " + e.what());
  }
  const json& ids = generation && generation->is_object() ? *generation : j;
  const std::string ids_where = generation && generation->is_object() ? "generation_config.json" : where;
  auto bos = ids_of(ids.value("bos_token_id", json()), ids_where, "bos_token_id");
  if (bos.empty() && &ids != &j) bos = ids_of(j.value("bos_token_id", json()), where, "bos_token_id");
  out.bos_token_id = bos.empty() ? -1 : bos[0];
  out.eos_token_ids = ids_of(ids.value("eos_token_id", json()), ids_where, "eos_token_id");
  if (out.eos_token_ids.empty() && &ids != &j) out.eos_token_ids = ids_of(j.value("eos_token_id", json()), where, "eos_token_id");
  for (int32_t id : out.eos_token_ids)
    if (id >= c.vocab_size)
      fail(DT_ERR_IO, ids_where + ": eos_token_id " + std::to_string(id) + " is outside the vocabulary (" +
                          std::to_string(c.vocab_size) + ")");
  return out;
}

std::string hf_architecture_of(const nn::GPTConfig& raw, std::string* why) {
  const nn::GPTConfig c = raw.resolved();
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return std::string();
  };
  if (c.norm == nn::NormKind::LayerNorm && c.pos == nn::PosKind::Learned && c.act == nn::Act::GELU && c.bias &&
      c.tied_embeddings)
    return "GPT2LMHeadModel";
  if (c.norm == nn::NormKind::RMSNorm && c.pos == nn::PosKind::RoPE && c.act == nn::Act::SwiGLU && !c.bias) {
    if (c.moe()) {
      if (c.moe_gating != kernels::MoeGating::Softmax || c.sliding_window)
        return no("a mixture of experts exports with softmax gates and no sliding window only");
      if (c.moe_shared_d_ff && c.moe_shared_gate) return "Qwen2MoeForCausalLM";
      if (c.moe_shared_d_ff || c.qkv_bias || !c.moe_renormalize)
        return no("a mixture of experts exports as Mixtral (gates renormalised over the top k, no q/k/v biases, no "
                  "shared expert) or as Qwen2-MoE (a shared expert with its sigmoid gate)");
      return "MixtralForCausalLM";
    }
    if (c.qkv_bias) return c.sliding_window ? no("q/k/v biases with a sliding window match no architecture")
                                            : "Qwen2ForCausalLM";
    return c.sliding_window ? "MistralForCausalLM" : "LlamaForCausalLM";
  }
  return no("the model (" + c.str() + ") is neither GPT-2 style (layernorm, learned positions, gelu, biases, "
            "tied embeddings) nor Llama style (rmsnorm, rope, swiglu, no biases but optionally on q/k/v)");
}

json hf_config_to_json(const nn::GPTConfig& raw, const std::string& arch_name, DType stored, int32_t bos,
                       const std::vector<int32_t>& eos) {
  const nn::GPTConfig c = raw.resolved();
  const Arch* arch = find_arch(arch_name);
  DT_CHECK(arch, "architecture \"" + arch_name + "\"; accepted: " + hf_architectures());
  const char* dtype = stored == DType::BF16 ? "bfloat16" : stored == DType::F16 ? "float16" : "float32";
  json j = {{"architectures", {arch->name}}, {"model_type", arch->model_type}, {"vocab_size", c.vocab_size},
            {"torch_dtype", dtype}, {"use_cache", true}};
  if (bos >= 0) j["bos_token_id"] = bos;
  if (!eos.empty()) j["eos_token_id"] = eos.size() == 1 ? json(eos[0]) : json(eos);
  if (arch->family == Family::GPT2) {
    j.update({{"n_positions", c.context}, {"n_embd", c.d_model}, {"n_layer", c.n_layer}, {"n_head", c.n_head},
              {"n_inner", c.d_ff}, {"activation_function", "gelu_new"}, {"layer_norm_epsilon", short_float(c.norm_eps)},
              {"tie_word_embeddings", true}, {"scale_attn_weights", true}});
    return j;
  }
  j.update({{"hidden_size", c.d_model}, {"intermediate_size", c.d_ff}, {"num_hidden_layers", c.n_layer},
            {"num_attention_heads", c.n_head}, {"num_key_value_heads", c.n_kv_head},
            {"head_dim", c.head_dim()}, {"max_position_embeddings", c.context}, {"rms_norm_eps", short_float(c.norm_eps)},
            {"hidden_act", "silu"}, {"tie_word_embeddings", c.tied_embeddings}, {"rope_theta", short_float(c.rope_base)},
            {"initializer_range", 0.02}, {"attention_dropout", 0.0}});
  const nn::RopeScaling& s = c.rope_scaling;
  if (s.kind == nn::RopeScalingKind::Linear) j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", short_float(s.factor)}};
  if (s.kind == nn::RopeScalingKind::Llama3)
    j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", short_float(s.factor)}, {"low_freq_factor", short_float(s.low_freq_factor)},
                         {"high_freq_factor", short_float(s.high_freq_factor)},
                         {"original_max_position_embeddings", s.original_context}};
  if (arch->family == Family::Llama) j.update({{"attention_bias", false}, {"mlp_bias", false}, {"pretraining_tp", 1}});
  if (arch->family == Family::Qwen2) j.update({{"use_sliding_window", false}});
  if (arch->family == Family::Mistral) j["sliding_window"] = c.sliding_window;
  if (arch->family == Family::Mixtral)
    j.update({{"sliding_window", c.sliding_window ? json(c.sliding_window) : json()},
              {"num_local_experts", c.n_experts}, {"num_experts_per_tok", c.top_k},
              {"router_aux_loss_coef", short_float(c.moe_aux_coef)}, {"router_jitter_noise", 0.0},
              {"output_router_logits", false}});
  if (arch->family == Family::Qwen2Moe)
    j.update({{"intermediate_size", c.moe_shared_d_ff}, {"moe_intermediate_size", c.d_ff},
              {"shared_expert_intermediate_size", c.moe_shared_d_ff}, {"num_experts", c.n_experts},
              {"num_experts_per_tok", c.top_k}, {"norm_topk_prob", c.moe_renormalize},
              {"router_aux_loss_coef", short_float(c.moe_aux_coef)}, {"decoder_sparse_step", 1},
              {"mlp_only_layers", json::array()}, {"qkv_bias", c.qkv_bias}, {"use_sliding_window", false},
              {"output_router_logits", false}});
  return j;
}

json hf_generation_config_json(int32_t bos, const std::vector<int32_t>& eos) {
  json j = json::object();
  if (bos >= 0) j["bos_token_id"] = bos;
  if (!eos.empty()) j["eos_token_id"] = eos.size() == 1 ? json(eos[0]) : json(eos);
  return j;
}

}  // namespace dt::io
