#include "io/chat_template.h"

#include <algorithm>

#include "core/error.h"
#include "io/file_util.h"
#include "io/jinja.h"
#include "io/json_limits.h"

namespace dt::io {

namespace {

struct Builtin {
  const char* name;
  const char* source;
};

#define DT_CHAT_TEMPLATE(name, text) {name, text},
const Builtin kBuiltins[] = {
#include "io/chat_templates_builtin.inc"
};
#undef DT_CHAT_TEMPLATE

constexpr uint64_t kMaxConfigBytes = uint64_t(64) << 20;  // some configs list thousands of added tokens
constexpr uint64_t kMaxTemplateBytes = uint64_t(1) << 20;

// End-of-turn markers looked for right after an assistant message's content, besides the
// eos token.
const char* const kEndMarkers[] = {"<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                   "<|end_of_text|>"};

std::string names_list() {
  std::string out;
  for (const std::string& n : ChatTemplate::builtin_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// A special token as tokenizer_config.json writes it: a string or an AddedToken dict.
bool config_token(const std::string& path, const nlohmann::json& j, const char* key, std::string* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  if (it->is_string()) {
    *out = it->get<std::string>();
    return true;
  }
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) {
      *out = c->get<std::string>();
      return true;
    }
  }
  fail(DT_ERR_IO, path + ": " + key + " is neither a string nor an AddedToken object with a string \"content\"");
}

std::string read_text(const std::string& path, const char* what) {
  std::vector<char> data = read_file(path, kMaxTemplateBytes, what);
  return std::string(data.begin(), data.end());
}

jinja::Value message_list(const std::vector<ChatMessage>& messages) {
  std::vector<jinja::Value> list;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    DT_CHECK(jinja::utf8_valid(m.role) && jinja::utf8_valid(m.content),
             "chat message " + std::to_string(i) + " is not valid UTF-8");
    // The content carries a region, so a render knows where it was printed.
    auto region = std::make_shared<const jinja::Regions>(jinja::Regions{{0, m.content.size(), static_cast<int>(i)}});
    list.push_back(jinja::Value::make_dict({{jinja::Value::string("role"), jinja::Value::string(m.role)},
                                            {jinja::Value::string("content"), jinja::Value::string(m.content, region)}}));
  }
  return jinja::Value::make_list(std::move(list));
}

// What transformers passes: the messages, tools and documents (None), add_generation_prompt
// and the special tokens.
std::vector<std::pair<std::string, jinja::Value>> template_vars(
    const std::vector<ChatMessage>& messages, bool add_generation_prompt,
    const std::vector<std::pair<std::string, std::string>>& tokens) {
  DT_CHECK(!messages.empty(), "cannot apply a chat template to an empty conversation; give at least one message");
  std::vector<std::pair<std::string, jinja::Value>> vars;
  for (const auto& kv : tokens) vars.emplace_back(kv.first, jinja::Value::string(kv.second));
  vars.emplace_back("messages", message_list(messages));
  vars.emplace_back("tools", jinja::Value::none());
  vars.emplace_back("documents", jinja::Value::none());
  vars.emplace_back("add_generation_prompt", jinja::Value::boolean(add_generation_prompt));
  return vars;
}

}  // namespace

ChatTemplate ChatTemplate::make(const std::string& source, std::vector<std::pair<std::string, std::string>> tokens) {
  ChatTemplate t;
  t.source_ = source;
  t.tmpl_ = std::make_shared<const jinja::Template>(jinja::Template::parse(source));
  for (const auto& kv : tokens) {
    if (kv.first == "bos_token") t.bos_ = kv.second;
    if (kv.first == "eos_token") t.eos_ = kv.second;
  }
  t.tokens_ = std::move(tokens);
  return t;
}

ChatTemplate ChatTemplate::from_source(const std::string& jinja, const std::string& bos_token,
                                       const std::string& eos_token) {
  return make(jinja, {{"bos_token", bos_token}, {"eos_token", eos_token}});
}

std::vector<std::string> ChatTemplate::builtin_names() {
  std::vector<std::string> names;
  for (const Builtin& b : kBuiltins) names.emplace_back(b.name);
  std::sort(names.begin(), names.end());
  return names;
}

std::string ChatTemplate::builtin_source(const std::string& family) {
  for (const Builtin& b : kBuiltins)
    if (family == b.name) return b.source;
  invalid("unknown chat template family '" + family + "'; built-in families: " + names_list());
}

ChatTemplate ChatTemplate::builtin(const std::string& family, const std::string& bos_token,
                                   const std::string& eos_token) {
  return from_source(builtin_source(family), bos_token, eos_token);
}

ChatTemplate ChatTemplate::from_tokenizer_config(const std::string& path, const std::string& name) {
  JsonLimits limits;
  limits.max_bytes = kMaxConfigBytes;
  nlohmann::json j = read_bounded_json_file(path, "a tokenizer_config.json", limits);
  if (!j.is_object()) fail(DT_ERR_IO, path + ": not a JSON object");
  const std::string want = name.empty() ? "default" : name;
  const std::string pick_builtin =
      "; set the \"chat_template\" option to a built-in family instead (" + names_list() + ")";

  std::string source;
  auto it = j.find("chat_template");
  if (it != j.end() && it->is_string()) {
    if (want != "default")
      fail(DT_ERR_NOT_FOUND, path + " has one chat_template, not a list of named ones: none is named '" + want + "'");
    source = it->get<std::string>();
  } else if (it != j.end() && it->is_array()) {
    std::string names;
    bool found = false;
    for (size_t k = 0; k < it->size(); ++k) {
      const nlohmann::json& e = (*it)[k];
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("template") ||
          !e["template"].is_string())
        fail(DT_ERR_IO, path + ": chat_template entry " + std::to_string(k) +
                            " is not an object with string \"name\" and \"template\"");
      const std::string n = e["name"].get<std::string>();
      names += (names.empty() ? "" : ", ") + n;
      if (n == want && !found) {
        source = e["template"].get<std::string>();
        found = true;
      }
    }
    if (!found)
      fail(DT_ERR_NOT_FOUND, path + " has no chat template named '" + want + "' (it has: " + names + ")" + pick_builtin);
  } else if (it != j.end() && !it->is_null()) {
    fail(DT_ERR_IO, path + ": chat_template is neither a string nor a list of {\"name\", \"template\"}");
  } else {
    // Newer transformers saves the template beside the config.
    const std::string dir = dir_of(path);
    const std::string file =
        want == "default" ? dir + "/chat_template.jinja" : dir + "/additional_chat_templates/" + want + ".jinja";
    if (!file_exists(file))
      fail(DT_ERR_NOT_FOUND, path + " has no chat_template" + (want == "default" ? "" : " named '" + want + "'") +
                                 " (and there is no " + file + ")" + pick_builtin);
    source = read_text(file, "a chat template");
  }

  std::vector<std::pair<std::string, std::string>> tokens;
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    std::string text;
    if (config_token(path, j, key, &text)) tokens.emplace_back(key, text);
  }
  return make(source, std::move(tokens));
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  return tmpl_->render(template_vars(messages, add_generation_prompt, tokens_)).text;
}

std::vector<std::pair<size_t, size_t>> ChatTemplate::assistant_spans(const std::vector<ChatMessage>& messages) const {
  jinja::RenderResult r = tmpl_->render(template_vars(messages, false, tokens_));
  if (tmpl_->has_generation()) return r.generation;

  std::vector<std::string> markers;
  if (!eos_.empty()) markers.push_back(eos_);
  for (const char* m : kEndMarkers) markers.emplace_back(m);
  std::vector<std::pair<size_t, size_t>> spans;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role != "assistant") continue;
    const int tag = static_cast<int>(i);
    auto first = std::find_if(r.regions.begin(), r.regions.end(), [&](const jinja::Region& g) { return g.tag == tag; });
    if (first == r.regions.end()) continue;  // the template did not print it
    size_t begin = first->begin, end = first->end;
    for (auto g = first + 1; g != r.regions.end() && g->tag == tag && g->begin == end; ++g) end = g->end;
    size_t p = end;
    while (p < r.text.size() && (r.text[p] == ' ' || r.text[p] == '\n' || r.text[p] == '\t' || r.text[p] == '\r')) ++p;
    for (const std::string& m : markers)
      if (r.text.compare(p, m.size(), m) == 0) {
        end = p + m.size();
        break;
      }
    spans.emplace_back(begin, end);
  }
  return spans;
}

}  // namespace dt::io
