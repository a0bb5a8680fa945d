#include "io/hf_model_text.h"

#include <filesystem>

#include "core/error.h"
#include "io/file_util.h"
#include "io/json_limits.h"

namespace dt::io {
namespace {

using json = nlohmann::json;

// A special token in tokenizer_config.json: a string or an AddedToken {"content": ...}.
std::string token_text(const json& cfg, const char* key) {
  if (!cfg.is_object() || !cfg.contains(key)) return "";
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

}  // namespace

HfModelText HfModelText::load(const std::string& path, const std::string& chat_family) {
  namespace fs = std::filesystem;
  const bool is_dir = fs::is_directory(path);
  const std::string dir = is_dir ? path : dir_of(path);
  const std::string tok_path = is_dir ? path + "/tokenizer.json" : path;
  if (!file_exists(tok_path))
    fail(DT_ERR_IO, tok_path + ": missing (a model directory needs a tokenizer.json for text in and out)");
  HfModelText t;
  t.tokenizer = std::make_shared<const HfTokenizer>(HfTokenizer::load(tok_path));
  const std::string cfg_path = dir + "/tokenizer_config.json";
  json cfg;
  if (file_exists(cfg_path)) cfg = read_bounded_json_file(cfg_path, "a tokenizer_config.json");
  t.bos_token = token_text(cfg, "bos_token");
  t.eos_token = token_text(cfg, "eos_token");
  if (!chat_family.empty()) {
    t.chat = std::make_shared<const ChatTemplate>(ChatTemplate::builtin(chat_family, t.bos_token, t.eos_token));
  } else if (file_exists(dir + "/chat_template.jinja")) {  // newer transformers save it beside the config
    const std::vector<char> src = read_file(dir + "/chat_template.jinja", uint64_t(1) << 20, "a chat template");
    t.chat = std::make_shared<const ChatTemplate>(
        ChatTemplate::from_source(std::string(src.begin(), src.end()), t.bos_token, t.eos_token));
  } else if (cfg.is_object() && cfg.contains("chat_template")) {
    t.chat = std::make_shared<const ChatTemplate>(ChatTemplate::from_tokenizer_config(cfg_path));
  }
  if (!t.bos_token.empty()) t.bos_id = t.tokenizer->token_to_id(t.bos_token);
  const std::string gen_path = dir + "/generation_config.json";
  if (file_exists(gen_path)) {
    const json gen = read_bounded_json_file(gen_path, "a generation_config.json");
    const json eos = gen.is_object() ? gen.value("eos_token_id", json()) : json();
    for (const json& id : eos.is_array() ? eos : json::array({eos}))
      if (id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < t.tokenizer->vocab_size())
        t.eos_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    if (t.bos_id < 0 && gen.is_object() && gen.value("bos_token_id", json()).is_number_integer())
      t.bos_id = gen["bos_token_id"].get<int32_t>();
  }
  if (t.eos_ids.empty() && !t.eos_token.empty()) {
    const int32_t id = t.tokenizer->token_to_id(t.eos_token);
    if (id >= 0) t.eos_ids.push_back(id);
  }
  return t;
}

const ChatTemplate& HfModelText::chat_template() const {
  if (!chat)
    fail(DT_ERR_NOT_FOUND, "this model has no chat template (tokenizer_config.json has no \"chat_template\"); pick a "
                           "built-in one with the \"chat_template\" option (--chat-template): one of " +
                               [] {
                                 std::string s;
                                 for (const std::string& n : ChatTemplate::builtin_names())
                                   s += (s.empty() ? "\"" : ", \"") + n + "\"";
                                 return s;
                               }());
  return *chat;
}

std::vector<int32_t> HfModelText::encode_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  return tokenizer->encode(chat_template().render(messages, add_generation_prompt), /*add_special_tokens=*/false);
}

}  // namespace dt::io
