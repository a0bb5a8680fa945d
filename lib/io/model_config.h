// A GPT's configuration as JSON, for checkpoints: the keys are those of
// dt_module_create_gpt ("vocab_size", "n_layer", "norm", ...), so a checkpoint records the
// model that wrote it in the words a host uses to build one, and a loader can rebuild it
// (dt_module_create_from_checkpoint) or refuse a model of another shape with a message that
// names the first field that differs.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "nn/config.h"

namespace dt::io {

// Every field, resolved (n_kv_head and d_ff filled in).
nlohmann::json config_to_json(const nn::GPTConfig& c);

// The inverse of config_to_json, validated; DT_ERR_IO naming `where` (a file, say) and the
// key when a field is missing or of the wrong kind.
nn::GPTConfig config_from_json(const nlohmann::json& j, const std::string& where);

// A lower bound on the bytes a checkpoint of this model holds (every parameter in the model's
// dtype: GPTConfig::param_count elements), computed without building it:
// a loader compares it with the data files' sizes before allocating, so a config claiming a
// billion layers is refused at once instead of exhausting memory.
double config_min_checkpoint_bytes(const nn::GPTConfig& c);

// "" when `saved` (a config_to_json object) describes `model`; else one line naming the
// first field that differs and both values. "seed" is ignored: it only drew the initial
// weights, which the checkpoint replaces.
std::string config_mismatch(const nlohmann::json& saved, const nn::GPTConfig& model);

}  // namespace dt::io
