// Hugging Face model directories through the C API: a GPT module from one, a module or an
// engine's trained model back to one, and a description without loading the weights.
#include "io/hf_model.h"
#include "io/model_config.h"
#include "lib/api/firewall.h"

using dt::api::guard;
using dt::api::need;

namespace {

dt::DType precision_of(const std::string& key, const std::string& v, const std::vector<std::string>& extra = {}) {
  if (v == "f32") return dt::DType::F32;
  if (v == "bf16") return dt::DType::BF16;
  if (v == "f16") return dt::DType::F16;
  std::string accepted = "\"f32\", \"bf16\", \"f16\"";
  for (const std::string& e : extra) accepted += ", \"" + e + "\"";
  dt::invalid("option \"" + key + "\" = \"" + v + "\"; accepted: " + accepted);
}

nlohmann::json inspect(const dt::io::HfModelDir& d) {
  const dt::nn::GPTConfig& c = d.config.gpt;
  nlohmann::json files = nlohmann::json::array();
  for (const std::string& f : d.files) files.push_back(f.substr(f.rfind('/') + 1));
  return {{"architecture", d.config.architecture},
          {"config", dt::io::config_to_json(c)},
          {"parameters", c.param_count()},
          {"stored_dtype", dt::dtype_name(c.dtype)},
          {"weight_bytes", d.weight_bytes},
          {"files", files},
          {"bos_token_id", d.config.bos_token_id},
          {"eos_token_ids", d.config.eos_token_ids},
          {"max_position_embeddings", d.config.max_positions}};
}

}  // namespace

namespace dt::api {

void save_hf(nn::GPT& model, const char* dir, const dt_options* options, const char* fn) {
  need(dir, "dir");
  OptionReader r(opts_of(options), fn,
                 {"precision", "architecture", "tokenizer_from", "bos_token_id", "eos_token_id", "eos_token_ids",
                  "max_shard_bytes"});
  io::HfSaveOptions o;
  o.dtype = precision_of("precision", r.get_string("precision", dtype_name(model.config().dtype)));
  o.architecture = r.get_string("architecture", "");
  o.tokenizer_from = r.get_string("tokenizer_from", "");
  const int64_t vocab = model.config().vocab_size;
  auto token_id = [&](const char* key) {
    const int64_t id = r.get_int(key, -1);
    DT_CHECK(id >= -1 && id < vocab, std::string("option \"") + key + "\" = " + std::to_string(id) +
                                         "; accepted: a token id in [0, " + std::to_string(vocab) + ") or -1 (none)");
    return static_cast<int32_t>(id);
  };
  o.bos_token_id = token_id("bos_token_id");
  if (const int32_t eos = token_id("eos_token_id"); eos >= 0) o.eos_token_ids = {eos};
  const std::string ids = r.get_string("eos_token_ids", "");
  for (int64_t id : parse_int_list(ids, 0, vocab - 1, [&](const std::string&) {
         return "option \"eos_token_ids\" = \"" + ids + "\"; accepted: token ids below " + std::to_string(vocab) +
                " separated by commas, such as \"2,7\"";
       }))
    o.eos_token_ids.push_back(static_cast<int32_t>(id));
  const int64_t shard = r.get_int("max_shard_bytes", static_cast<int64_t>(o.max_shard_bytes));
  DT_CHECK(shard >= 1, "option \"max_shard_bytes\" = " + std::to_string(shard) + "; accepted: >= 1");
  o.max_shard_bytes = static_cast<uint64_t>(shard);
  io::hf_save(model, dir, o);
}

}  // namespace dt::api

extern "C" {

dt_status dt_module_create_from_hf(const char* dir, const dt_options* options, dt_module** out) {
  return guard("dt_module_create_from_hf", [&] {
    need(dir, "dir");
    need(out, "out");
    dt::OptionReader r(dt::api::opts_of(options), "dt_module_create_from_hf", {"precision", "context", "random_init", "random_init_seed"});
    const bool random = r.get_bool("random_init", false);
    const dt::io::HfModelDir d = dt::io::hf_open(dir, !random);
    dt::nn::GPTConfig c = d.config.gpt;
    const std::string p = r.get_string("precision", "f32");
    c.dtype = p == "stored" ? d.config.gpt.dtype : precision_of("precision", p, {"stored"});
    if (r.has("context")) {
      const int64_t ctx = r.get_int("context", c.context);
      const bool learned = c.pos == dt::nn::PosKind::Learned;
      DT_CHECK(ctx >= 1 && ctx <= c.context && (!learned || ctx == c.context),
               "option \"context\" = " + std::to_string(ctx) + "; accepted: " +
                   (learned ? std::to_string(c.context) + " (learned positions: the table's length)"
                            : "1 to " + std::to_string(c.context) +
                                  (c.sliding_window ? " (the sliding window)" : " (max_position_embeddings)")));
      c.context = ctx;
    }
    dt::api::refuse_beyond_memory("dt_module_create_from_hf", "the model's weights",
                                  static_cast<double>(c.param_count()) * static_cast<double>(dt::dtype_size(c.dtype)));
    if (random) c.seed = static_cast<uint64_t>(r.get_int("random_init_seed", 1337));
    std::shared_ptr<dt::nn::GPT> gpt;
    if (random) {
      gpt = std::make_shared<dt::nn::GPT>(c);  // on the CPU, where the files are read
    } else {
      dt::nn::ScopedSkipParamInit loading;  // hf_load_weights sets every parameter or fails
      gpt = std::make_shared<dt::nn::GPT>(c);
      dt::io::hf_load_weights(d, *gpt);
    }
    *out = new dt_module{gpt, gpt.get()};
  });
}

dt_status dt_module_save_hf(dt_module* module, const char* dir, const dt_options* options) {
  return guard("dt_module_save_hf", [&] {
    dt_module& m = *need(module, "module");
    DT_CHECK(m.gpt, "module: dt_module_save_hf needs a GPT (this module is an MLP or a sequential)");
    dt::api::save_hf(*m.gpt, dir, options, "dt_module_save_hf");
  });
}

dt_status dt_hf_inspect_json(const char* dir, char* buf, size_t capacity, size_t* needed) {
  return guard("dt_hf_inspect_json", [&] {
    need(dir, "dir");
    dt::api::write_text(inspect(dt::io::hf_open(dir, /*need_weights=*/false)).dump(), buf, capacity, needed);
  });
}

}  // extern "C"
