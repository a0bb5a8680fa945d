#include "model_args.h"

namespace dtcli {

void ModelArgs::add_to(CLI::App& app) {
  app.add_option("--model", preset, "Starting shape: gpt-tiny (2 layers, width 64), gpt-small (6 layers, width 384), "
                                    "llama-tiny (gpt-tiny with RMSNorm, RoPE, SwiGLU); the flags below override it")
      ->capture_default_str()
      ->group("Model");
  app.add_option("--layers", layers, "Transformer blocks")->group("Model");
  app.add_option("--d-model", d_model, "Model width")->group("Model");
  app.add_option("--heads", heads, "Attention heads (must divide --d-model)")->group("Model");
  app.add_option("--kv-heads", kv_heads, "Key/value heads for grouped-query attention (must divide --heads)")
      ->group("Model");
  app.add_option("--d-ff", d_ff, "MLP width (default 4 x --d-model)")->group("Model");
  app.add_option("--vocab", vocab, "Vocabulary size (default 256: bytes)")->group("Model");
  app.add_option("--norm", norm, "layernorm or rmsnorm")->group("Model");
  app.add_option("--pos", pos, "Positions: learned or rope")->group("Model");
  app.add_option("--act", act, "MLP activation: gelu or swiglu")->group("Model");
  app.add_option("--precision", precision, "f32 (default), bf16 (f32 master weights) or f16 (plus loss scaling)")
      ->group("Model");
  app.add_option("--device", device, "cpu (default) or cuda:N: where the model lives and its math runs")
      ->group("Model");
}

Module ModelArgs::create(int64_t context, int64_t seed) const {
  Options o = make_options();
  set(o.get(), "preset", preset);
  set(o.get(), "context", context);
  set(o.get(), "seed", seed);
  // Only what the user gave: the library's messages then name the option they typed.
  if (layers >= 0) set(o.get(), "n_layer", layers);
  if (d_model >= 0) set(o.get(), "d_model", d_model);
  if (heads >= 0) set(o.get(), "n_head", heads);
  if (kv_heads >= 0) set(o.get(), "n_kv_head", kv_heads);
  if (d_ff >= 0) set(o.get(), "d_ff", d_ff);
  if (vocab >= 0) set(o.get(), "vocab_size", vocab);
  if (!norm.empty()) set(o.get(), "norm", norm);
  if (!pos.empty()) set(o.get(), "pos", pos);
  if (!act.empty()) set(o.get(), "act", act);
  if (!precision.empty()) set(o.get(), "precision", precision);
  if (!device.empty()) set(o.get(), "device", device);
  dt_module* m = nullptr;
  check(dt_module_create_gpt(o.get(), &m), "creating the model");
  return Module(m);
}

}  // namespace dtcli
