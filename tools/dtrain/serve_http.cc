#include "serve_http.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "cli.h"

namespace dtcli {
namespace serve {

HttpError bad(const std::string& param, const std::string& message, const std::string& code) {
  return HttpError{400, message, "invalid_request_error", param, code};
}

nlohmann::json parse_body(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) throw bad("", "the request body is not valid JSON");
  if (!j.is_object()) throw bad("", "the request body must be a JSON object");
  return j;
}

bool neutral(const std::string& key, const nlohmann::json& v) {
  if (key == "user") return v.is_string();
  if (key == "logprobs") return v.is_null() || v == false;
  if (key == "suffix" || key == "top_logprobs") return v.is_null();
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

void check_model(const nlohmann::json& j, const std::string& model_name) {
  if (!j.contains("model") || !j["model"].is_string()) throw bad("model", "'model' is required (a string)");
  if (j["model"] != model_name)
    throw HttpError{404, "The model '" + j["model"].get<std::string>() + "' does not exist; this server has '" +
                             model_name + "'",
                    "invalid_request_error", "model", "model_not_found"};
}

void parse_sampling(const nlohmann::json& j, const ServedModel& m, CompletionRequest& r) {
  if (j.contains("temperature") && !j["temperature"].is_null())
    r.temperature = number(j["temperature"], "temperature", 0, 2, "0 to 2");
  if (j.contains("top_p") && !j["top_p"].is_null()) r.top_p = number(j["top_p"], "top_p", 1e-9, 1, "(0, 1]");
  if (j.contains("top_k") && !j["top_k"].is_null()) {
    // -1 is vLLM's "all", as is 0 here.
    r.top_k = integer(j["top_k"], "top_k", -1, m.vocab, "-1 or 0 (all), or 1 to the vocabulary size");
    if (r.top_k < 0) r.top_k = 0;
  }
  if (j.contains("seed") && !j["seed"].is_null()) r.seed = integer(j["seed"], "seed", INT64_MIN, INT64_MAX, "an integer");
  if (j.contains("n") && !j["n"].is_null()) integer(j["n"], "n", 1, 1, "1");
  if (j.contains("stream") && !j["stream"].is_null()) {
    if (!j["stream"].is_boolean()) throw bad("stream", "'stream' must be true or false");
    r.stream = j["stream"];
  }
  if (j.contains("stream_options") && !j["stream_options"].is_null()) {
    const nlohmann::json& so = j["stream_options"];
    if (!so.is_object()) throw bad("stream_options", "'stream_options' must be an object ({\"include_usage\": true})");
    if (!r.stream) throw bad("stream_options", "'stream_options' is only allowed when 'stream' is true");
    for (const auto& [k, v] : so.items()) {
      if (k != "include_usage")
        throw bad("stream_options", "stream_options." + k + " is not supported; accepted: include_usage");
      if (!v.is_null() && !v.is_boolean()) throw bad("stream_options", "stream_options.include_usage must be true or false");
      r.include_usage = v.is_boolean() && v.get<bool>();
    }
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
}

void check_fits(const ServedModel& m, const CompletionRequest& r, const std::string& param) {
  const int64_t n = static_cast<int64_t>(r.prompt.size());
  if (n + r.max_tokens > m.context)
    throw bad(param, "This model's context is " + std::to_string(m.context) + " tokens, but " +
                         std::to_string(n + r.max_tokens) + " were requested (" + std::to_string(n) +
                         " in the prompt, " + std::to_string(r.max_tokens) +
                         " for the completion); shorten the " + (param == "messages" ? "messages" : "prompt") +
                         " or max_tokens",
              "context_length_exceeded");
  if (n + r.max_tokens > m.kv_positions)
    throw bad("max_tokens", "the request needs " + std::to_string(n + r.max_tokens) + " positions of KV cache; this "
                            "server holds " + std::to_string(m.kv_positions) + " per replica (dtrain serve --kv-blocks)",
              "kv_cache_exceeded");
}

}  // namespace serve

namespace {

using serve::bad;
using serve::dump;
using serve::integer;

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

// The tokenizer's ids of a prompt's text (a client's text: an error is a 400).
std::vector<int32_t> prompt_ids(dt_tokenizer* t, const std::string& text) {
  size_t n = 0;
  if (dt_tokenizer_encode(t, text.data(), text.size(), 1, nullptr, 0, &n) != DT_OK)
    throw bad("prompt", std::string("the prompt cannot be tokenized: ") + dt_last_error_message());
  std::vector<int32_t> ids(n);
  if (dt_tokenizer_encode(t, text.data(), text.size(), 1, ids.data(), ids.size(), &n) != DT_OK)
    throw bad("prompt", std::string("the prompt cannot be tokenized: ") + dt_last_error_message());
  ids.resize(n);
  return ids;
}

// Takes the text a detokenizer made final.
std::string detok_text(dt_detokenizer* d) {
  char small[512];
  size_t needed = 0;
  check(dt_detokenizer_text(d, small, sizeof small, &needed), "dt_detokenizer_text");
  if (needed <= sizeof small) return std::string(small, needed > 0 ? needed - 1 : 0);
  std::string s(needed, '\0');
  check(dt_detokenizer_text(d, s.data(), s.size(), &needed), "dt_detokenizer_text");
  s.resize(needed > 0 ? needed - 1 : 0);
  return s;
}

}  // namespace

std::string HttpError::body() const {
  nlohmann::json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return dump({{"error", e}});
}

CompletionRequest parse_completion(const std::string& body, const ServedModel& m) {
  const nlohmann::json j = serve::parse_body(body);
  static const std::set<std::string> known = {"model", "prompt", "max_tokens", "temperature", "top_p", "top_k",
                                              "seed", "stop", "n", "stream", "stream_options"};
  for (const auto& [k, v] : j.items())
    if (!known.count(k) && !serve::neutral(k, v))
      throw bad(k, "Unrecognized or unsupported request argument supplied: " + k +
                       "; accepted: model, prompt, max_tokens, temperature, top_p, top_k, seed, stop, n (1), "
                       "stream, stream_options");
  serve::check_model(j, m.name);
  CompletionRequest r;
  if (!j.contains("prompt")) throw bad("prompt", "'prompt' is required");
  const nlohmann::json& p = j["prompt"];
  const bool text = p.is_string() || (p.is_array() && p.size() == 1 && p[0].is_string());
  if (text) {
    const std::string s = p.is_string() ? p.get<std::string>() : p[0].get<std::string>();
    if (m.tokenizer) {
      r.prompt = prompt_ids(m.tokenizer, s);
    } else {
      for (unsigned char c : s) r.prompt.push_back(c);  // bytes of a string are unsigned
    }
  } else if (p.is_array() && !p.empty() && std::all_of(p.begin(), p.end(), [](const auto& x) { return x.is_number_integer(); })) {
    for (const auto& x : p)
      r.prompt.push_back(static_cast<int32_t>(integer(x, "prompt", 0, m.vocab - 1, "token ids in [0, " + std::to_string(m.vocab) + ")")));
  } else {
    throw bad("prompt", "'prompt' must be a string, a list of one string, or a list of token ids");
  }
  if (r.prompt.empty()) throw bad("prompt", "'prompt' is empty; accepted: at least one token");
  for (int32_t t : r.prompt)
    if (t >= m.vocab)
      throw bad("prompt", "the prompt holds token " + std::to_string(t) + ", outside this model's vocabulary of " +
                              std::to_string(m.vocab));
  if (j.contains("max_tokens") && !j["max_tokens"].is_null())
    r.max_tokens = integer(j["max_tokens"], "max_tokens", 1, m.context, "1 to the context, " + std::to_string(m.context));
  serve::check_fits(m, r, "prompt");
  serve::parse_sampling(j, m, r);
  return r;
}

Completion::Completion(dt_server* server, const ServedModel& m, const CompletionRequest& r)
    : server_(server), prompt_tokens_(static_cast<int64_t>(r.prompt.size())), stop_(r.stop) {
  Options o = make_options();
  set(o.get(), "max_tokens", r.max_tokens);
  set(o.get(), "temperature", r.temperature);
  set(o.get(), "top_p", r.top_p);
  set(o.get(), "top_k", r.top_k);
  set(o.get(), "seed", r.seed);
  for (const std::string& s : stop_) hold_ = std::max(hold_, s.size() - 1);
  std::string ids;
  if (m.tokenizer) {
    // The model's end-of-sequence ids end the request ("stop"); the stop strings are found
    // in the detokenized text.
    stop_ids_ = m.eos_ids;
    for (int32_t t : stop_ids_) ids += (ids.empty() ? "" : ",") + std::to_string(t);
    if (dt_detokenizer_create(m.tokenizer, 1, &detok_) != DT_OK)
      throw HttpError{500, dt_last_error_message(), "server_error", "", ""};
  } else {
    // A one-byte stop string is also a stop token, so the engine ends the request at once;
    // longer ones are found in the text here.
    for (const std::string& s : stop_)
      if (s.size() == 1) ids += (ids.empty() ? "" : ",") + std::to_string(static_cast<unsigned char>(s[0]));
  }
  if (!ids.empty()) set(o.get(), "stop_tokens", ids);
  const dt_status st = dt_server_submit(server_, r.prompt.data(), prompt_tokens_, o.get(), nullptr, nullptr, &id_);
  if (st != DT_OK) {
    const std::string msg = dt_last_error_message();
    dt_detokenizer_destroy(detok_);
    detok_ = nullptr;
    if (st == DT_ERR_UNAVAILABLE) throw HttpError{503, msg, "server_error", "", "unavailable"};
    throw bad("", msg);
  }
}

Completion::~Completion() {
  if (!done_) cancel();
  // Takes what is left so that the server forgets the id.
  while (!forgotten_) {
    int32_t buf[256], state = 0, fin = 0;
    int64_t n = 0;
    if (dt_server_poll(server_, id_, buf, 256, &n, &state, &fin, 1000) != DT_OK || fin) forgotten_ = true;
  }
  dt_detokenizer_destroy(detok_);
}

void Completion::cancel() {
  dt_server_cancel(server_, id_);  // NOT_FOUND when it already ended: nothing to do
  if (finish_.empty()) finish_ = "abort";
  done_ = true;
}

void Completion::take(int32_t token) {
  if (!detok_) {
    text_ += static_cast<char>(token);
    return;
  }
  check(dt_detokenizer_push(detok_, token), "decoding the completion");
  text_ += detok_text(detok_);
}

std::string Completion::advance(int32_t timeout_ms) {
  if (done_) return "";
  int32_t buf[256], state = 0, fin = 0;
  int64_t n = 0;
  check(dt_server_poll(server_, id_, buf, 256, &n, &state, &fin, timeout_ms), "dt_server_poll");
  forgotten_ = forgotten_ || fin;
  // A token at a time: the usage counts the tokens up to the one that completed a stop string.
  size_t cut = std::string::npos;
  for (int64_t i = 0; i <= n && cut == std::string::npos; ++i) {
    const size_t before = text_.size();
    if (i < n) {
      ++tokens_;
      last_token_ = buf[i];
      take(buf[i]);
    } else if (fin && detok_) {  // the end: what the detokenizer held back
      check(dt_detokenizer_finish(detok_), "decoding the completion");
      text_ += detok_text(detok_);
    }
    if (text_.size() == before) continue;
    for (const std::string& s : stop_) {  // only where the new text can complete it
      const size_t from = before >= s.size() - 1 ? before - (s.size() - 1) : 0;
      cut = std::min(cut, text_.find(s, from));
    }
  }
  if (cut != std::string::npos) {  // a stop string: the text ends before it
    text_.resize(cut);
    finish_ = "stop";
    if (!fin) dt_server_cancel(server_, id_);
    done_ = true;
  } else if (fin) {
    const bool eos = std::find(stop_ids_.begin(), stop_ids_.end(), last_token_) != stop_ids_.end();
    finish_ = state == DT_REQUEST_FINISHED ? (eos ? "stop" : "length")
              : state == DT_REQUEST_REJECTED ? "rejected" : "abort";
    done_ = true;
  }
  size_t ready = done_ ? text_.size() : (text_.size() > hold_ ? text_.size() - hold_ : 0);
  if (!done_) ready = utf8_complete(text_, ready);
  std::string out = ready > sent_ ? text_.substr(sent_, ready - sent_) : "";
  sent_ = std::max(sent_, ready);
  return out;
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

nlohmann::json completion_json(const std::string& id, const std::string& model, const std::string& text,
                               const std::string& finish, int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"id", id},
          {"object", "text_completion"},
          {"created", unix_seconds()},
          {"model", model},
          {"choices", {{{"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish}}}},
          {"usage", usage_json(prompt_tokens, completion_tokens)}};
}

nlohmann::json chunk_json(const std::string& id, const std::string& model, const std::string& text,
                          const std::string& finish) {
  nlohmann::json f = finish.empty() ? nlohmann::json(nullptr) : nlohmann::json(finish);
  return {{"id", id},
          {"object", "text_completion"},
          {"created", unix_seconds()},
          {"model", model},
          {"choices", {{{"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", f}}}}};
}

}  // namespace dtcli
