#include "nn/config.h"

#include "core/error.h"

namespace dt::nn {

const char* pos_name(PosKind p) { return p == PosKind::Learned ? "learned" : "rope"; }

GPTConfig GPTConfig::resolved() const {
  GPTConfig c = *this;
  if (c.n_kv_head == 0) c.n_kv_head = c.n_head;
  if (c.d_ff == 0) c.d_ff = 4 * c.d_model;
  return c;
}

std::string GPTConfig::str() const {
  GPTConfig c = resolved();
  return "GPT(vocab_size=" + std::to_string(c.vocab_size) + ", context=" + std::to_string(c.context) +
         ", n_layer=" + std::to_string(c.n_layer) + ", n_head=" + std::to_string(c.n_head) +
         ", n_kv_head=" + std::to_string(c.n_kv_head) + ", d_model=" + std::to_string(c.d_model) +
         ", d_ff=" + std::to_string(c.d_ff) + ", norm=" + norm_name(c.norm) + ", pos=" + pos_name(c.pos) +
         ", act=" + act_name(c.act) + ", tied_embeddings=" + (c.tied_embeddings ? "true" : "false") +
         // Only when not f32, so the strings of existing f32 models (and checkpoints) stay as they were.
         (c.dtype == DType::F32 ? std::string() : std::string(", dtype=") + dtype_name(c.dtype)) + ")";
}

static void positive(const char* field, int64_t v) {
  DT_CHECK(v > 0, std::string("GPTConfig.") + field + " = " + std::to_string(v) + "; accepted: > 0");
}

void validate(const GPTConfig& raw) {
  positive("vocab_size", raw.vocab_size);
  positive("context", raw.context);
  positive("n_layer", raw.n_layer);
  positive("n_head", raw.n_head);
  positive("d_model", raw.d_model);
  DT_CHECK(raw.n_kv_head >= 0, "GPTConfig.n_kv_head = " + std::to_string(raw.n_kv_head) + "; accepted: >= 0");
  DT_CHECK(raw.dtype == DType::F32 || raw.dtype == DType::BF16 || raw.dtype == DType::F16,
           std::string("GPTConfig.dtype = ") + dtype_name(raw.dtype) + "; accepted: f32, bf16, f16");
  DT_CHECK(raw.d_ff >= 0, "GPTConfig.d_ff = " + std::to_string(raw.d_ff) + "; accepted: >= 0");
  const GPTConfig c = raw.resolved();
  DT_CHECK(c.d_model % c.n_head == 0, "GPTConfig.n_head = " + std::to_string(c.n_head) + " does not divide d_model = " +
                                          std::to_string(c.d_model));
  DT_CHECK(c.n_head % c.n_kv_head == 0, "GPTConfig.n_kv_head = " + std::to_string(c.n_kv_head) +
                                            " does not divide n_head = " + std::to_string(c.n_head));
  DT_CHECK(c.pos != PosKind::RoPE || c.head_dim() % 2 == 0,
           "GPTConfig.d_model / n_head = " + std::to_string(c.head_dim()) + "; rope needs an even head dim");
  DT_CHECK(c.norm_eps >= 0, "GPTConfig.norm_eps must be >= 0");
  DT_CHECK(c.rope_base > 0, "GPTConfig.rope_base must be > 0");
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
