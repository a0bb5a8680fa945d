#include "nn/config.h"

#include <cmath>
#include <map>
#include <utility>

#include "core/error.h"

namespace dt::nn {

const char* pos_name(PosKind p) { return p == PosKind::Learned ? "learned" : "rope"; }

GPTConfig GPTConfig::resolved() const {
  GPTConfig c = *this;
  if (c.n_kv_head == 0) c.n_kv_head = c.n_head;
  if (c.d_ff == 0) c.d_ff = 4 * c.d_model;
  return c;
}

int64_t GPTConfig::shared_expert_params() const {
  if (!moe() || moe_shared_d_ff == 0) return 0;
  const int64_t d = d_model, f = moe_shared_d_ff, biases = bias ? 1 : 0;
  const int64_t fc_width = act == Act::SwiGLU ? 2 * f : f;
  return d * fc_width + biases * fc_width + f * d + biases * d + (moe_shared_gate ? d : 0);
}

int64_t GPTConfig::param_count() const {
  const GPTConfig c = resolved();
  const int64_t d = c.d_model, biases = c.bias ? 1 : 0;
  const int64_t norm_params = d + (c.norm == NormKind::LayerNorm ? biases * d : 0);  // gain (+ bias)
  const auto linear = [&](int64_t in, int64_t out, int64_t has_bias) { return in * out + has_bias * out; };
  const int64_t qkv_width = (c.n_head + 2 * c.n_kv_head) * (d / c.n_head);
  const int64_t fc_width = c.act == Act::SwiGLU ? 2 * c.d_ff : c.d_ff;  // SwiGLU: gate and up in one
  const int64_t mlp = linear(d, fc_width, biases) + linear(c.d_ff, d, biases);
  const int64_t ffn = c.moe() ? c.n_experts * mlp + linear(d, c.n_experts, 0) + c.shared_expert_params() : mlp;
  const int64_t block = 2 * norm_params + linear(d, qkv_width, c.qkv_bias_elems()) + linear(d, d, biases) + ffn;
  return c.vocab_size * d + (c.pos == PosKind::Learned ? c.context * d : 0) + c.n_layer * block + norm_params +
         (c.tied_embeddings ? 0 : linear(d, c.vocab_size, 0));
}

int64_t GPTConfig::param_count(int64_t tp, int64_t* replicated) const {
  const GPTConfig c = resolved();
  const int64_t d = c.d_model, biases = c.bias ? 1 : 0, hd = c.head_dim();
  const int64_t norm_params = d + (c.norm == NormKind::LayerNorm ? biases * d : 0);
  const int64_t vocab_rows = (c.vocab_size + tp - 1) / tp;                     // padded split
  const int64_t kv_heads = c.n_kv_head % tp == 0 ? c.n_kv_head / tp : 1;       // or one, replicated
  const int64_t qkv_rows = (c.n_head / tp + 2 * kv_heads) * hd;
  const int64_t fc_rows = (c.act == Act::SwiGLU ? 2 * c.d_ff : c.d_ff) / tp;
  // Per block: the norms and the two row-parallel biases whole; the rest this rank's part.
  // A mixture of experts is not split over tp (its experts and router whole on every rank,
  // nn/moe.h): the MLP's terms give way to it.
  const int64_t fc_width = c.act == Act::SwiGLU ? 2 * c.d_ff : c.d_ff;
  const int64_t experts =
      c.n_experts * (d * fc_width + biases * fc_width + c.d_ff * d) + d * c.n_experts + c.shared_expert_params();
  const int64_t block_whole = 2 * norm_params + (c.moe() ? biases * d + experts + c.n_experts * biases * d : 2 * biases * d);
  const int64_t block_split = qkv_rows * (d + c.qkv_bias_elems()) + d * (d / tp) +
                              (c.moe() ? 0 : fc_rows * (d + biases) + d * (c.d_ff / tp));
  const int64_t positions = c.pos == PosKind::Learned ? c.context * d : 0;
  const int64_t whole = positions + c.n_layer * block_whole + norm_params;
  if (replicated) *replicated = whole;
  return whole + c.n_layer * block_split + vocab_rows * d * (c.tied_embeddings ? 1 : 2);
}

namespace {
const std::map<std::string, GPTConfig>& presets() {
  static const std::map<std::string, GPTConfig> p = [] {
    std::map<std::string, GPTConfig> m;
    GPTConfig tiny;
    tiny.context = 64;
    tiny.n_layer = 2;
    tiny.n_head = 2;
    tiny.d_model = 64;
    m["gpt-tiny"] = tiny;
    m["gpt-small"] = GPTConfig{};
    m["llama-tiny"] = tiny.llama_style();
    GPTConfig mixtral = tiny.llama_style();
    mixtral.n_experts = 4;
    mixtral.top_k = 2;
    mixtral.d_ff = 128;
    m["mixtral-tiny"] = mixtral;
    GPTConfig qwen2_moe = mixtral;
    qwen2_moe.qkv_bias = true;
    qwen2_moe.moe_renormalize = false;
    qwen2_moe.moe_shared_d_ff = 128;
    qwen2_moe.moe_shared_gate = true;
    m["qwen2-moe-tiny"] = qwen2_moe;
    return m;
  }();
  return p;
}
}  // namespace

const GPTConfig* gpt_preset(const std::string& name) {
  auto it = presets().find(name);
  return it == presets().end() ? nullptr : &it->second;
}

std::string gpt_preset_names() {
  std::string s;
  for (const auto& [name, c] : presets()) s += std::string(s.empty() ? "" : ", ") + "\"" + name + "\"";
  return s;
}

std::string GPTConfig::str() const {
  GPTConfig c = resolved();
  return "GPT(vocab_size=" + std::to_string(c.vocab_size) + ", context=" + std::to_string(c.context) +
         ", n_layer=" + std::to_string(c.n_layer) + ", n_head=" + std::to_string(c.n_head) +
         ", n_kv_head=" + std::to_string(c.n_kv_head) + ", d_model=" + std::to_string(c.d_model) +
         ", d_ff=" + std::to_string(c.d_ff) + ", norm=" + norm_name(c.norm) + ", pos=" + pos_name(c.pos) +
         ", act=" + act_name(c.act) + ", tied_embeddings=" + (c.tied_embeddings ? "true" : "false") +
         // The Hugging Face architectures' extras, only when set (the strings of earlier models stay).
         (c.qkv_bias && !c.bias ? std::string(", qkv_bias=true") : std::string()) +
         (c.rope_scaling.kind != RopeScalingKind::None ? std::string(", rope_scaling=") + rope_scaling_name(c.rope_scaling.kind) : std::string()) +
         (c.sliding_window ? ", sliding_window=" + std::to_string(c.sliding_window) : std::string()) +
         (c.moe() ? ", n_experts=" + std::to_string(c.n_experts) + ", top_k=" + std::to_string(c.top_k) +
                        ", moe_gating=" + kernels::moe_gating_name(c.moe_gating) +
                        (c.moe_renormalize ? "" : ", moe_renormalize=false") +
                        (c.moe_capacity > 0 ? ", moe_capacity=" + std::to_string(c.moe_capacity) : std::string()) +
                        (c.moe_shared_d_ff ? ", moe_shared_d_ff=" + std::to_string(c.moe_shared_d_ff) +
                                                 (c.moe_shared_gate ? ", moe_shared_gate=true" : "")
                                           : std::string())
                  : std::string()) +
         // Only when not f32, so the strings of existing f32 models (and checkpoints) stay as they were.
         (c.dtype == DType::F32 ? std::string() : std::string(", dtype=") + dtype_name(c.dtype)) + ")";
}

namespace {

// Each size field's accepted range, declared once: validate() checks it and its message
// states it. The upper bounds are far beyond any model this library can train on one host
// (so they never refuse a real model) and small enough that products of two of them cannot
// overflow int64, and that a hostile checkpoint's config is refused before any allocation.
struct SizeRange {
  const char* field;
  int64_t GPTConfig::*member;
  int64_t lo, hi;
};
constexpr SizeRange kSizeRanges[] = {
    {"vocab_size", &GPTConfig::vocab_size, 1, int64_t(1) << 24}, {"context", &GPTConfig::context, 1, int64_t(1) << 22},
    {"n_layer", &GPTConfig::n_layer, 1, 4096},                    {"n_head", &GPTConfig::n_head, 1, 4096},
    {"n_kv_head", &GPTConfig::n_kv_head, 0, 4096},                {"d_model", &GPTConfig::d_model, 1, int64_t(1) << 17},
    {"d_ff", &GPTConfig::d_ff, 0, int64_t(1) << 20},              {"sliding_window", &GPTConfig::sliding_window, 0, int64_t(1) << 22},
    {"n_experts", &GPTConfig::n_experts, 0, 1024},                {"top_k", &GPTConfig::top_k, 1, 1024},
    {"moe_shared_d_ff", &GPTConfig::moe_shared_d_ff, 0, int64_t(1) << 20},
};

}  // namespace

void validate(const GPTConfig& raw) {
  for (const SizeRange& r : kSizeRanges) {
    const int64_t v = raw.*r.member;
    DT_CHECK(v >= r.lo && v <= r.hi, std::string("GPTConfig.") + r.field + " = " + std::to_string(v) + "; accepted: " +
                                         std::to_string(r.lo) + " to " + std::to_string(r.hi) +
                                         (r.lo == 0 ? " (0: the default)" : ""));
  }
  DT_CHECK(raw.dtype == DType::F32 || raw.dtype == DType::BF16 || raw.dtype == DType::F16,
           std::string("GPTConfig.dtype = ") + dtype_name(raw.dtype) + "; accepted: f32, bf16, f16");
  const GPTConfig c = raw.resolved();
  DT_CHECK(c.d_model % c.n_head == 0, "GPTConfig.n_head = " + std::to_string(c.n_head) + " does not divide d_model = " +
                                          std::to_string(c.d_model));
  DT_CHECK(c.n_head % c.n_kv_head == 0, "GPTConfig.n_kv_head = " + std::to_string(c.n_kv_head) +
                                            " does not divide n_head = " + std::to_string(c.n_head));
  DT_CHECK(c.pos != PosKind::RoPE || c.head_dim() % 2 == 0,
           "GPTConfig.d_model / n_head = " + std::to_string(c.head_dim()) + "; rope needs an even head dim");
  DT_CHECK(c.norm_eps >= 0, "GPTConfig.norm_eps must be >= 0");
  DT_CHECK(c.rope_base > 0, "GPTConfig.rope_base must be > 0");
  DT_CHECK(c.sliding_window == 0 || c.context <= c.sliding_window,
           "GPTConfig.context = " + std::to_string(c.context) + " exceeds sliding_window = " +
               std::to_string(c.sliding_window) + "; accepted: context <= sliding_window (attention beyond the "
               "window is not implemented; pass a shorter context)");
  DT_CHECK(c.moe() || (c.moe_shared_d_ff == 0 && !c.moe_shared_gate),
           "GPTConfig.moe_shared_d_ff = " + std::to_string(c.moe_shared_d_ff) +
               " (a shared expert) needs a mixture of experts; accepted: 0 with n_experts = 0");
  DT_CHECK(!c.moe_shared_gate || c.moe_shared_d_ff > 0,
           "GPTConfig.moe_shared_gate needs a shared expert; accepted: moe_shared_d_ff > 0 with it");
  if (c.moe()) {
    DT_CHECK(c.top_k <= c.n_experts, "GPTConfig.top_k = " + std::to_string(c.top_k) + "; accepted: 1 to n_experts = " +
                                         std::to_string(c.n_experts));
    DT_CHECK(c.moe_gating == kernels::MoeGating::Softmax || c.moe_gating == kernels::MoeGating::Sigmoid,
             "GPTConfig.moe_gating: accepted: softmax, sigmoid");
    for (auto [field, v] : {std::pair{"moe_aux_coef", c.moe_aux_coef}, std::pair{"moe_z_coef", c.moe_z_coef}})
      DT_CHECK(std::isfinite(v) && v >= 0 && v <= 1,
               std::string("GPTConfig.") + field + " = " + std::to_string(v) + "; accepted: 0 to 1");
    DT_CHECK(c.moe_capacity == 0 || (c.moe_capacity >= 0.01f && c.moe_capacity <= 1024),
             "GPTConfig.moe_capacity = " + std::to_string(c.moe_capacity) +
                 "; accepted: 0 (dropless) or 0.01 to 1024 (the capacity factor)");
  }
  const RopeScaling& rs = c.rope_scaling;
  if (rs.kind != RopeScalingKind::None) {
    DT_CHECK(c.pos == PosKind::RoPE, "GPTConfig.rope_scaling needs pos = rope");
    DT_CHECK(rs.factor >= 1.0f && rs.factor <= 1024.0f,
             "GPTConfig.rope_scaling.factor = " + std::to_string(rs.factor) + "; accepted: 1 to 1024");
  }
  if (rs.kind == RopeScalingKind::Llama3)
    DT_CHECK(rs.low_freq_factor > 0 && rs.high_freq_factor > rs.low_freq_factor && rs.original_context >= 1,
             "GPTConfig.rope_scaling (llama3): accepted: 0 < low_freq_factor < high_freq_factor and "
             "original_max_position_embeddings >= 1");
}

void validate(const MLPConfig& c) {
  DT_CHECK(c.sizes.size() >= 2, "MLPConfig.sizes has " + std::to_string(c.sizes.size()) +
                                    " entries; accepted: at least 2 ({in, ..., out})");
  for (size_t i = 0; i < c.sizes.size(); ++i)
    DT_CHECK(c.sizes[i] > 0, "MLPConfig.sizes[" + std::to_string(i) + "] = " + std::to_string(c.sizes[i]) +
                                 "; accepted: > 0");
  DT_CHECK(c.init_std >= 0, "MLPConfig.init_std must be >= 0");
}

}  // namespace dt::nn
