// A Hugging Face model directory in and out: config.json (io/hf_config.h), the weights in
// model.safetensors or shards named by model.safetensors.index.json, generation_config.json.
//
// Import maps each libdtrain parameter to the Hugging Face tensors it is made of (declared
// once per architecture in hf_model.cc): q, k and v rows stacked into our fused qkv, gate and
// up into our fused SwiGLU fc, GPT-2's Conv1D weights ([in, out]) transposed. The files are
// read tensor by tensor (pread, see ReadOnlyFile) and each converted (f32, bf16 or f16 to
// the model's dtype) into its parameter: no second copy of the weights is held, only one
// tensor's bytes at a time. Everything is checked before
// any parameter is written: the index's file names (plain names inside the directory, no
// path, no "..": a shard index cannot point outside it), each file's header
// (io/safetensors.h), every tensor the model needs present once with its shape and a float
// dtype, and no tensor left over but those known to be derived buffers (GPT-2's attention
// masks, rotary inv_freq, a tied head's copy). Errors name the file and the tensor.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/hf_config.h"
#include "nn/gpt.h"

namespace dt::io {

struct HfModelDir {
  std::string dir;
  HfModelConfig config;
  std::vector<std::string> files;  // the safetensors files, paths
  uint64_t weight_bytes = 0;       // their total size
};

// Reads and checks config.json, generation_config.json (optional) and the weight files'
// names and sizes (not their contents). DT_ERR_IO for what is missing or malformed;
// DT_ERR_INVALID_ARGUMENT for an unsupported architecture or setting.
// need_weights false: a directory of a config alone is accepted (files stays empty): a model
// of that shape to initialize at random.
HfModelDir hf_open(const std::string& dir, bool need_weights = true);

// Fills every parameter of `model` (whole, on the CPU, built from a config of dir.config's
// shape; its dtype may differ) from the files. Nothing is written unless all checks pass.
void hf_load_weights(const HfModelDir& dir, nn::GPT& model);

struct HfSaveOptions {
  std::string architecture;          // "" : the one the model's config is an instance of
  DType dtype = DType::F32;          // of the stored weights
  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;
  uint64_t max_shard_bytes = uint64_t(4) << 30;  // larger models are sharded with an index
  std::string tokenizer_from;        // a directory whose tokenizer files are copied over ("": none)
};

// Writes `model` (whole, CPU) as a Hugging Face directory `dir` (created if missing): config.json,
// generation_config.json, the weights, and the tokenizer files. Each file is replaced
// atomically. INVALID_ARGUMENT when the model matches no architecture (naming why).
void hf_save(nn::GPT& model, const std::string& dir, const HfSaveOptions& o);

// The tokenizer and chat files a model directory may carry, copied by hf_save.
const std::vector<std::string>& hf_tokenizer_files();

}  // namespace dt::io
