#include "serve_http.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "cli.h"

namespace dtcli {
namespace {

HttpError bad(const std::string& param, const std::string& message, const std::string& code = "") {
  return HttpError{400, message, "invalid_request_error", param, code};
}

// Fields OpenAI defines that this server does not implement: accepted only with the value
// that means "not used", so a client that sends its defaults works.
bool neutral(const std::string& key, const nlohmann::json& v) {
  if (key == "user") return v.is_string();
  if (key == "stream_options") return v.is_null() || v.is_object();
  if (key == "logprobs" || key == "suffix") return v.is_null();
  if (key == "echo") return v.is_null() || v == false;
  if (key == "best_of") return v.is_null() || v == 1;
  if (key == "presence_penalty" || key == "frequency_penalty") return v.is_null() || (v.is_number() && v == 0);
  if (key == "logit_bias") return v.is_null() || (v.is_object() && v.empty());
  return false;
}

double number(const nlohmann::json& v, const std::string& key, double lo, double hi, const std::string& accepted) {
  if (!v.is_number()) throw bad(key, "'" + key + "' must be a number (" + accepted + ")");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    throw bad(key, "'" + key + "' = " + v.dump() + " is out of range; accepted: " + accepted);
  return x;
}

int64_t integer(const nlohmann::json& v, const std::string& key, int64_t lo, int64_t hi, const std::string& accepted) {
  if (!v.is_number_integer()) throw bad(key, "'" + key + "' must be an integer (" + accepted + ")");
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) throw bad(key, "'" + key + "' = " + v.dump() + " is out of range; accepted: " + accepted);
  return x;
}

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

// The longest prefix of text[0, n) that does not end inside a UTF-8 character: a byte-level
// model makes a multi-byte character one token at a time, and a chunk that split it would
// reach the client as replacement characters.
size_t utf8_complete(const std::string& text, size_t n) {
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const unsigned char c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return back < len ? n - back : n;  // the character starting here is not whole yet
  }
  return n;
}

}  // namespace

std::string HttpError::body() const {
  nlohmann::json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return dump({{"error", e}});
}

CompletionRequest parse_completion(const std::string& body, const std::string& model_name, int64_t context,
                                   int64_t vocab_size, int64_t kv_positions) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) throw bad("", "the request body is not valid JSON");
  if (!j.is_object()) throw bad("", "the request body must be a JSON object");
  static const std::set<std::string> known = {"model", "prompt", "max_tokens", "temperature", "top_p", "top_k",
                                              "seed", "stop", "n", "stream"};
  for (const auto& [k, v] : j.items())
    if (!known.count(k) && !neutral(k, v))
      throw bad(k, "Unrecognized or unsupported request argument supplied: " + k +
                       "; accepted: model, prompt, max_tokens, temperature, top_p, top_k, seed, stop, n (1), stream");
  if (!j.contains("model") || !j["model"].is_string()) throw bad("model", "'model' is required (a string)");
  if (j["model"] != model_name)
    throw HttpError{404, "The model '" + j["model"].get<std::string>() + "' does not exist; this server has '" +
                             model_name + "'",
                    "invalid_request_error", "model", "model_not_found"};
  CompletionRequest r;
  if (!j.contains("prompt")) throw bad("prompt", "'prompt' is required");
  const nlohmann::json& p = j["prompt"];
  if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    const std::string s = p[0];
    r.prompt.assign(s.begin(), s.end());
  } else if (p.is_string()) {
    const std::string s = p;
    r.prompt.assign(s.begin(), s.end());
  } else if (p.is_array() && !p.empty() && std::all_of(p.begin(), p.end(), [](const auto& x) { return x.is_number_integer(); })) {
    for (const auto& x : p) r.prompt.push_back(static_cast<int32_t>(integer(x, "prompt", 0, vocab_size - 1, "token ids in [0, " + std::to_string(vocab_size) + ")")));
  } else {
    throw bad("prompt", "'prompt' must be a string, a list of one string, or a list of token ids");
  }
  for (int32_t& t : r.prompt) t = t < 0 ? t + 256 : t;  // bytes of a string are unsigned
  if (r.prompt.empty()) throw bad("prompt", "'prompt' is empty; accepted: at least one token");
  for (int32_t t : r.prompt)
    if (t >= vocab_size)
      throw bad("prompt", "the prompt holds token " + std::to_string(t) + ", outside this model's vocabulary of " +
                              std::to_string(vocab_size));
  if (j.contains("max_tokens") && !j["max_tokens"].is_null())
    r.max_tokens = integer(j["max_tokens"], "max_tokens", 1, context, "1 to the context, " + std::to_string(context));
  const int64_t n = static_cast<int64_t>(r.prompt.size());
  if (n + r.max_tokens > context)
    throw bad("prompt", "This model's context is " + std::to_string(context) + " tokens, but " +
                            std::to_string(n + r.max_tokens) + " were requested (" + std::to_string(n) +
                            " in the prompt, " + std::to_string(r.max_tokens) +
                            " for the completion); shorten the prompt or max_tokens",
              "context_length_exceeded");
  if (n + r.max_tokens > kv_positions)
    throw bad("max_tokens", "the request needs " + std::to_string(n + r.max_tokens) + " positions of KV cache; this "
                            "server holds " + std::to_string(kv_positions) + " per replica (dtrain serve --kv-blocks)",
              "kv_cache_exceeded");
  if (j.contains("temperature") && !j["temperature"].is_null())
    r.temperature = number(j["temperature"], "temperature", 0, 2, "0 to 2");
  if (j.contains("top_p") && !j["top_p"].is_null()) r.top_p = number(j["top_p"], "top_p", 1e-9, 1, "(0, 1]");
  if (j.contains("top_k") && !j["top_k"].is_null()) r.top_k = integer(j["top_k"], "top_k", 0, vocab_size, ">= 0");
  if (j.contains("seed") && !j["seed"].is_null()) r.seed = integer(j["seed"], "seed", INT64_MIN, INT64_MAX, "an integer");
  if (j.contains("n") && !j["n"].is_null()) integer(j["n"], "n", 1, 1, "1");
  if (j.contains("stream") && !j["stream"].is_null()) {
    if (!j["stream"].is_boolean()) throw bad("stream", "'stream' must be true or false");
    r.stream = j["stream"];
  }
  if (j.contains("stop") && !j["stop"].is_null()) {
    const nlohmann::json& s = j["stop"];
    std::vector<nlohmann::json> items = s.is_array() ? std::vector<nlohmann::json>(s.begin(), s.end())
                                                     : std::vector<nlohmann::json>{s};
    if (items.size() > 4) throw bad("stop", "'stop' holds " + std::to_string(items.size()) + " strings; accepted: up to 4");
    for (const auto& x : items) {
      if (!x.is_string() || x.get<std::string>().empty()) throw bad("stop", "'stop' must be non-empty strings");
      r.stop.push_back(x);
    }
  }
  return r;
}

Completion::Completion(dt_server* server, const CompletionRequest& r)
    : server_(server), prompt_tokens_(static_cast<int64_t>(r.prompt.size())), stop_(r.stop) {
  Options o = make_options();
  set(o.get(), "max_tokens", r.max_tokens);
  set(o.get(), "temperature", r.temperature);
  set(o.get(), "top_p", r.top_p);
  set(o.get(), "top_k", r.top_k);
  set(o.get(), "seed", r.seed);
  // A one-byte stop string is also a stop token, so the engine ends the request at once;
  // longer ones are found in the text here.
  std::string ids;
  for (const std::string& s : stop_) {
    hold_ = std::max(hold_, s.size() - 1);
    if (s.size() == 1) ids += (ids.empty() ? "" : ",") + std::to_string(static_cast<unsigned char>(s[0]));
  }
  if (!ids.empty()) set(o.get(), "stop_tokens", ids);
  const dt_status st = dt_server_submit(server_, r.prompt.data(), prompt_tokens_, o.get(), nullptr, nullptr, &id_);
  if (st == DT_ERR_UNAVAILABLE) throw HttpError{503, dt_last_error_message(), "server_error", "", "unavailable"};
  if (st != DT_OK) throw bad("", dt_last_error_message());
}

Completion::~Completion() {
  if (!done_) cancel();
  // Takes what is left so that the server forgets the id.
  while (!forgotten_) {
    int32_t buf[256], state = 0, fin = 0;
    int64_t n = 0;
    if (dt_server_poll(server_, id_, buf, 256, &n, &state, &fin, 1000) != DT_OK || fin) forgotten_ = true;
  }
}

void Completion::cancel() {
  dt_server_cancel(server_, id_);  // NOT_FOUND when it already ended: nothing to do
  if (finish_.empty()) finish_ = "abort";
  done_ = true;
}

std::string Completion::advance(int32_t timeout_ms) {
  if (done_) return "";
  int32_t buf[256], state = 0, fin = 0;
  int64_t n = 0;
  check(dt_server_poll(server_, id_, buf, 256, &n, &state, &fin, timeout_ms), "dt_server_poll");
  tokens_ += n;
  for (int64_t i = 0; i < n; ++i) text_ += static_cast<char>(buf[i]);
  size_t cut = std::string::npos;
  for (const std::string& s : stop_) cut = std::min(cut, text_.find(s));
  if (cut != std::string::npos) {  // a stop string: the text ends before it
    text_.resize(cut);
    finish_ = "stop";
    if (!fin) dt_server_cancel(server_, id_);
    done_ = true;
  } else if (fin) {
    finish_ = state == DT_REQUEST_FINISHED ? "length" : state == DT_REQUEST_REJECTED ? "rejected" : "abort";
    done_ = true;
  }
  forgotten_ = forgotten_ || fin;
  size_t ready = done_ ? text_.size() : (text_.size() > hold_ ? text_.size() - hold_ : 0);
  if (!done_) ready = utf8_complete(text_, ready);
  std::string out = ready > sent_ ? text_.substr(sent_, ready - sent_) : "";
  sent_ = std::max(sent_, ready);
  return out;
}

nlohmann::json completion_json(const std::string& id, const std::string& model, const std::string& text,
                               const std::string& finish, int64_t prompt_tokens, int64_t completion_tokens) {
  const auto created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  return {{"id", id},
          {"object", "text_completion"},
          {"created", created.count()},
          {"model", model},
          {"choices", {{{"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish}}}},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens},
                     {"total_tokens", prompt_tokens + completion_tokens}}}};
}

nlohmann::json chunk_json(const std::string& id, const std::string& model, const std::string& text,
                          const std::string& finish) {
  const auto created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  nlohmann::json f = finish.empty() ? nlohmann::json(nullptr) : nlohmann::json(finish);
  return {{"id", id},
          {"object", "text_completion"},
          {"created", created.count()},
          {"model", model},
          {"choices", {{{"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", f}}}}};
}

}  // namespace dtcli
