#include "serve_chat.h"

#include <algorithm>
#include <set>

#include "cli.h"
#include "serve_responses.h"

namespace dtcli {
namespace {

using serve::bad;

// The chat fields OpenAI defines that this server does not implement, at their "not used"
// values (beyond those that completions share).
bool chat_neutral(const std::string& key, const nlohmann::json& v) {
  if (key == "tools") return v.is_null() || (v.is_array() && v.empty());
  if (key == "tool_choice") return v.is_null() || v == "none";
  if (key == "parallel_tool_calls") return v.is_null() || v.is_boolean();
  if (key == "response_format") return v.is_null() || (v.is_object() && v.size() == 1 && v.value("type", "") == "text");
  return serve::neutral(key, v);
}

// A message's content: a string, or OpenAI's list of text parts (joined by newlines, as
// vLLM joins them).
std::string content_text(const nlohmann::json& c, const std::string& where) {
  if (c.is_string()) return c.get<std::string>();
  if (c.is_array()) {
    std::string s;
    for (size_t k = 0; k < c.size(); ++k) {
      const nlohmann::json& part = c[k];
      const std::string at = where + "[" + std::to_string(k) + "]";
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
        throw bad(where, "'" + at + "' must be {\"type\": \"text\", \"text\": \"...\"}; only text is accepted");
      s += (k ? "\n" : "") + part["text"].get<std::string>();
    }
    return s;
  }
  throw bad(where, "'" + where + "' must be a string (or a list of {\"type\": \"text\", \"text\": ...} parts)");
}

// The messages as the chat template takes them: [{"role", "content"}, ...].
nlohmann::json messages_of(const nlohmann::json& j) {
  if (!j.contains("messages")) throw bad("messages", "'messages' is required: a list of {\"role\", \"content\"} objects");
  const nlohmann::json& ms = j["messages"];
  if (!ms.is_array() || ms.empty())
    throw bad("messages", "'messages' must be a non-empty list of {\"role\": ..., \"content\": ...} objects");
  static const std::set<std::string> roles = {"system", "user", "assistant"};
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < ms.size(); ++i) {
    const nlohmann::json& m = ms[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad(at, "'" + at + "' must be an object with \"role\" and \"content\"");
    for (const auto& [k, v] : m.items())
      if (k != "role" && k != "content" && k != "name")
        throw bad(at + "." + k, "'" + at + "." + k + "' is not supported; accepted: role, content, name");
    if (!m.contains("role") || !m["role"].is_string() || !roles.count(m["role"].get<std::string>()))
      throw bad(at + ".role", "'" + at + ".role' must be \"system\", \"user\" or \"assistant\"" +
                                  (m.contains("role") ? ", not " + dump(m["role"]) : std::string()));
    if (!m.contains("content") || m["content"].is_null())
      throw bad(at + ".content", "'" + at + ".content' is required (a string)");
    out.push_back({{"role", m["role"]}, {"content", content_text(m["content"], at + ".content")}});
  }
  return out;
}

// The conversation through the chat template, then its tokens (the template's text holds
// the special tokens: none are added).
std::vector<int32_t> chat_prompt(const ServedModel& m, const nlohmann::json& messages) {
  const std::string mj = dump(messages);
  size_t needed = 0;
  dt_status st = dt_tokenizer_apply_chat_template(m.tokenizer, mj.c_str(), 1, nullptr, 0, &needed);
  std::string text;
  if (st == DT_OK) {
    text.assign(needed, '\0');
    st = dt_tokenizer_apply_chat_template(m.tokenizer, mj.c_str(), 1, text.data(), text.size(), &needed);
    text.resize(needed > 0 ? needed - 1 : 0);
  }
  if (st == DT_ERR_NOT_FOUND)
    throw bad("messages", "this model has no chat template (neither its tokenizer_config.json nor a "
                          "chat_template.jinja holds one); start dtrain serve with --chat-template FAMILY (chatml, "
                          "llama3, llama2, mistral, zephyr)",
              "no_chat_template");
  if (st != DT_OK) {  // the template's own error, such as raise_exception: its message, for the client
    std::string msg = dt_last_error_message();
    const std::string fn = "dt_tokenizer_apply_chat_template: ";
    if (msg.rfind(fn, 0) == 0) msg.erase(0, fn.size());
    throw bad("messages", msg);
  }
  size_t n = 0;
  std::vector<int32_t> ids;
  st = dt_tokenizer_encode(m.tokenizer, text.data(), text.size(), 0, nullptr, 0, &n);
  if (st == DT_OK) {
    ids.resize(n);
    st = dt_tokenizer_encode(m.tokenizer, text.data(), text.size(), 0, ids.data(), ids.size(), &n);
    ids.resize(n);
  }
  if (st != DT_OK) throw bad("messages", std::string("the conversation cannot be tokenized: ") + dt_last_error_message());
  return ids;
}

}  // namespace

CompletionRequest parse_chat(const std::string& body, const ServedModel& m) {
  const nlohmann::json j = serve::parse_body(body);
  static const std::set<std::string> known = {
      "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "seed", "stop", "n",
      "stream", "stream_options", "logprobs", "top_logprobs", "presence_penalty", "frequency_penalty",
      "repetition_penalty", "logit_bias"};
  for (const auto& [k, v] : j.items())
    if (!known.count(k) && !chat_neutral(k, v))
      throw bad(k, "Unrecognized or unsupported request argument supplied: " + k +
                       "; accepted: model, messages, max_tokens, max_completion_tokens, temperature, top_p, top_k, "
                       "seed, stop, n, stream, stream_options, logprobs, top_logprobs, presence_penalty, "
                       "frequency_penalty, repetition_penalty, logit_bias, user");
  serve::check_model(j, m.name);
  if (!m.tokenizer)
    throw bad("", "chat completions need the model's tokenizer and chat template: this server serves a checkpoint "
                  "whose tokens are bytes; serve a Hugging Face directory with dtrain serve --model DIR, or use "
                  "/v1/completions");
  const nlohmann::json messages = messages_of(j);
  CompletionRequest r;
  r.prompt = chat_prompt(m, messages);
  if (r.prompt.empty()) throw bad("messages", "the conversation renders to no tokens");
  serve::parse_max_tokens(j, m, r, INT64_MAX);  // OpenAI's default for chat: as many as fit
  serve::check_fits(m, r, "messages");
  serve::parse_sampling(j, m, r);
  const bool lp = j.contains("logprobs") && !j["logprobs"].is_null();
  if (lp && !j["logprobs"].is_boolean()) throw bad("logprobs", "'logprobs' must be true or false (chat completions)");
  if (lp && j["logprobs"].get<bool>()) r.logprobs = 0;
  if (j.contains("top_logprobs") && !j["top_logprobs"].is_null()) {
    if (r.logprobs < 0) throw bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r.logprobs = serve::integer(j["top_logprobs"], "top_logprobs", 0, kMaxLogprobs, "0 to " + std::to_string(kMaxLogprobs));
  }
  return r;
}

}  // namespace dtcli
