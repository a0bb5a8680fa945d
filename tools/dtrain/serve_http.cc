#include "serve_http.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <atomic>
#include <random>
#include <set>

#include "cli.h"
#include "serve_responses.h"

namespace dtcli {
namespace serve {

HttpError bad(const std::string& param, const std::string& message, const std::string& code) {
  return HttpError{400, message, "invalid_request_error", param, code};
}

nlohmann::json parse_body(const std::string& body) {
  nlohmann::json j = parse_request_json(body);
  if (!j.is_object()) throw bad("", "the request body must be a JSON object");
  return j;
}

bool neutral(const std::string& key, const nlohmann::json& v) {
  if (key == "user") return v.is_string();
  if (key == "suffix") return v.is_null();
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
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))  // would wrap
    throw bad(key, "'" + key + "' = " + v.dump() + " is out of range; accepted: " + accepted);
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) throw bad(key, "'" + key + "' = " + v.dump() + " is out of range; accepted: " + accepted);
  return x;
}

void check_model(const nlohmann::json& j, const std::string& model_name) {
  if (!j.contains("model") || !j["model"].is_string()) throw bad("model", "'model' is required (a string)");
  if (j["model"] != model_name)
    throw HttpError{404, "The model '" + j["model"].get<std::string>() + "' does not exist; this server has '" +
                             model_name + "'",
                    "invalid_request_error", "model", "model_not_found"};
}

namespace {
bool given(const nlohmann::json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

// OpenAI's logit_bias: {"token id": bias in [-100, 100]}, as dt_server_submit's "id:bias,...".
std::string logit_bias(const nlohmann::json& v, int64_t vocab) {
  if (!v.is_object()) throw bad("logit_bias", "'logit_bias' must be an object {\"token id\": bias}");
  if (v.size() > 300) throw bad("logit_bias", "'logit_bias' holds " + std::to_string(v.size()) + " entries; accepted: up to 300");
  std::string out;
  for (const auto& [k, b] : v.items()) {
    const bool digits = !k.empty() && k.size() < 10 && std::all_of(k.begin(), k.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoll(k) >= vocab)
      throw bad("logit_bias", "logit_bias key \"" + k + "\" is not a token id; accepted: 0 to " + std::to_string(vocab - 1));
    const double x = number(b, "logit_bias", -100, 100, "a bias from -100 to 100");
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s:%.9g", out.empty() ? "" : ",", k.c_str(), x);
    out += buf;
  }
  return out;
}
}  // namespace

void parse_sampling(const nlohmann::json& j, const ServedModel& m, CompletionRequest& r) {
  if (given(j, "temperature")) r.temperature = number(j["temperature"], "temperature", 0, 2, "0 to 2");
  if (given(j, "top_p")) {
    r.top_p = number(j["top_p"], "top_p", 0, 1, "greater than 0, at most 1");
    if (r.top_p <= 0) throw bad("top_p", "'top_p' = " + j["top_p"].dump() + " is out of range; accepted: greater than 0, at most 1");
  }
  if (given(j, "top_k")) {
    // -1 is vLLM's "all", as is 0 here.
    r.top_k = integer(j["top_k"], "top_k", -1, m.vocab, "-1 or 0 (all), or 1 to " + std::to_string(m.vocab) + " (the vocabulary)");
    if (r.top_k < 0) r.top_k = 0;
  }
  if (given(j, "seed")) {
    r.seed = static_cast<uint64_t>(integer(j["seed"], "seed", INT64_MIN, INT64_MAX, "an integer from -2^63 to 2^63-1"));
  } else {
    static std::atomic<uint64_t> counter{std::random_device{}()};
    r.seed = counter.fetch_add(0x9E3779B97F4A7C15ull);  // a different draw per request
  }
  if (given(j, "presence_penalty")) r.presence_penalty = number(j["presence_penalty"], "presence_penalty", -2, 2, "-2 to 2");
  if (given(j, "frequency_penalty")) r.frequency_penalty = number(j["frequency_penalty"], "frequency_penalty", -2, 2, "-2 to 2");
  if (given(j, "repetition_penalty")) {
    r.repetition_penalty = number(j["repetition_penalty"], "repetition_penalty", 0, 2, "greater than 0, at most 2 (1: none)");
    if (r.repetition_penalty <= 0) throw bad("repetition_penalty", "'repetition_penalty' must be greater than 0 (1: none)");
  }
  if (given(j, "logit_bias")) r.logit_bias = logit_bias(j["logit_bias"], m.vocab);
  if (given(j, "stream")) {
    if (!j["stream"].is_boolean()) throw bad("stream", "'stream' must be true or false");
    r.stream = j["stream"];
  }
  if (given(j, "n")) r.n = integer(j["n"], "n", 1, kMaxChoices, "1 to " + std::to_string(kMaxChoices));
  r.best_of = r.n;
  if (given(j, "best_of")) {
    r.best_of = integer(j["best_of"], "best_of", r.n, kMaxChoices, "n (" + std::to_string(r.n) + ") to " + std::to_string(kMaxChoices));
    if (r.stream && r.best_of > r.n) throw bad("best_of", "'best_of' greater than 'n' cannot be streamed (the best are known only at the end)");
  }
  if (given(j, "stream_options")) {
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
  if (given(j, "stop")) {
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

void parse_max_tokens(const nlohmann::json& j, const ServedModel& m, CompletionRequest& r, int64_t fallback) {
  const char* key = given(j, "max_completion_tokens") ? "max_completion_tokens" : given(j, "max_tokens") ? "max_tokens" : nullptr;
  const int64_t room = std::min(m.context, m.kv_positions) - static_cast<int64_t>(r.prompt.size());
  if (key) r.max_tokens = integer(j[key], key, 1, INT64_MAX, "at least 1");
  else r.max_tokens = std::max<int64_t>(1, std::min(fallback, room));  // a small model's context still answers
}

void check_fits(const ServedModel& m, const CompletionRequest& r, const std::string& param) {
  const int64_t n = static_cast<int64_t>(r.prompt.size());
  if (r.max_tokens > m.context - n)
    throw bad(param, "This model's context is " + std::to_string(m.context) + " tokens, but " +
                         std::to_string(n + r.max_tokens) + " were requested (" + std::to_string(n) +
                         " in the prompt, " + std::to_string(r.max_tokens) +
                         " for the completion); shorten the " + (param == "messages" ? "messages" : "prompt") +
                         " or max_tokens",
              "context_length_exceeded");
  if (r.max_tokens > m.kv_positions - n)
    throw bad("max_tokens", "the request needs " + std::to_string(n + r.max_tokens) + " positions of KV cache; this "
                            "server holds " + std::to_string(m.kv_positions) + " per replica (dtrain serve --kv-blocks)",
              "kv_cache_exceeded");
}

}  // namespace serve

namespace {

using serve::bad;
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
  static const std::set<std::string> known = {
      "model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "n", "best_of", "stream",
      "stream_options", "logprobs", "echo", "presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias"};
  for (const auto& [k, v] : j.items())
    if (!known.count(k) && !serve::neutral(k, v))
      throw bad(k, "Unrecognized or unsupported request argument supplied: " + k +
                       "; accepted: model, prompt, max_tokens, temperature, top_p, top_k, seed, stop, n, best_of, "
                       "stream, stream_options, logprobs, echo, presence_penalty, frequency_penalty, "
                       "repetition_penalty, logit_bias, user, suffix (null)");
  serve::check_model(j, m.name);
  CompletionRequest r;
  if (!j.contains("prompt")) throw bad("prompt", "'prompt' is required");
  const nlohmann::json& p = j["prompt"];
  const bool text = p.is_string() || (p.is_array() && p.size() == 1 && p[0].is_string());
  if (text) {
    r.prompt_text = p.is_string() ? p.get<std::string>() : p[0].get<std::string>();
    if (m.tokenizer) {
      r.prompt = prompt_ids(m.tokenizer, r.prompt_text);
    } else {
      for (unsigned char c : r.prompt_text) r.prompt.push_back(c);  // bytes of a string are unsigned
    }
  } else if (p.is_array() && !p.empty() && std::all_of(p.begin(), p.end(), [](const auto& x) { return x.is_number_integer(); })) {
    for (const auto& x : p)
      r.prompt.push_back(static_cast<int32_t>(integer(x, "prompt", 0, m.vocab - 1, "token ids in [0, " + std::to_string(m.vocab) + ")")));
    for (int32_t t : r.prompt) r.prompt_text += token_text(m, t);
  } else if (p.is_array() && p.size() > 1) {
    throw bad("prompt", "'prompt' holds " + std::to_string(p.size()) + " prompts; this server takes one per request "
                        "(a string, a list of one string, or a list of token ids): send one request per prompt");
  } else {
    throw bad("prompt", "'prompt' must be a string, a list of one string, or a list of token ids");
  }
  if (r.prompt.empty()) throw bad("prompt", "'prompt' is empty; accepted: at least one token");
  serve::parse_max_tokens(j, m, r, 16);  // OpenAI's default for completions
  serve::check_fits(m, r, "prompt");
  serve::parse_sampling(j, m, r);
  if (j.contains("logprobs") && !j["logprobs"].is_null())
    r.logprobs = integer(j["logprobs"], "logprobs", 0, kMaxLogprobs, "0 to " + std::to_string(kMaxLogprobs));
  if (j.contains("echo") && !j["echo"].is_null()) {
    if (!j["echo"].is_boolean()) throw bad("echo", "'echo' must be true or false");
    r.echo = j["echo"];
  }
  if (r.echo && r.logprobs >= 0)
    throw bad("echo", "'echo' with 'logprobs' needs the prompt's log-probabilities, which this server does not "
                      "compute; send echo or logprobs, not both");
  return r;
}

nlohmann::json parse_request_json(const std::string& body) {
  // One pass over the text, outside strings, counting depth and values.
  const size_t max_values = std::max<size_t>(1024, body.size() / 4);
  int depth = 0;
  size_t values = 0;
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true, ++values;
    else if (c == '[' || c == '{') {
      if (++depth > 64) throw bad("", "the request body nests JSON deeper than 64 levels");
      ++values;
    } else if (c == ']' || c == '}') --depth;
    else if (c == ',') ++values;
    if (values > max_values) throw bad("", "the request body holds more JSON values than its size allows");
  }
  // Duplicate keys: nlohmann keeps the last silently; a SAX pass finds them.
  struct Keys : nlohmann::json_sax<nlohmann::json> {
    std::vector<std::set<std::string>> open;
    std::string dup;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return false; }
    bool start_object(std::size_t) override { return open.emplace_back(), true; }
    bool key(string_t& k) override { return open.back().insert(k).second || (dup = k, false); }
    bool end_object() override { return open.pop_back(), true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
  } keys;
  if (!nlohmann::json::sax_parse(body, &keys, nlohmann::json::input_format_t::json, true)) {
    if (!keys.dup.empty()) throw bad(keys.dup, "the key \"" + keys.dup + "\" appears twice in one object");
    throw bad("", "the request body is not valid JSON");
  }
  return nlohmann::json::parse(body);
}

std::string token_text(const ServedModel& m, int32_t token) {
  if (!m.tokenizer) return std::string(1, static_cast<char>(token));
  return read_text([&](char* b, size_t c, size_t* n) { return dt_tokenizer_decode(m.tokenizer, &token, 1, 0, b, c, n); },
                   "dt_tokenizer_decode");
}

CompletionText::CompletionText(const ServedModel& m, const std::vector<std::string>& stop) : stop_(stop) {
  for (const std::string& s : stop_) hold_ = std::max(hold_, s.size() - 1);
  if (m.tokenizer && dt_detokenizer_create(m.tokenizer, 1, &detok_) != DT_OK)
    throw HttpError{500, dt_last_error_message(), "server_error", "", ""};
}

CompletionText::~CompletionText() { dt_detokenizer_destroy(detok_); }

void CompletionText::add(const std::string& piece) {
  if (piece.empty() || stopped_) return;
  const size_t before = text_.size();
  text_ += piece;
  size_t cut = std::string::npos;
  for (const std::string& s : stop_)  // only where the new text can complete one
    cut = std::min(cut, text_.find(s, before >= s.size() - 1 ? before - (s.size() - 1) : 0));
  if (cut != std::string::npos) {
    text_.resize(cut);
    stopped_ = true;
  }
}

bool CompletionText::push(int32_t token) {
  if (stopped_ || finished_) return stopped_;
  ++tokens_;
  if (!detok_) {
    add(std::string(1, static_cast<char>(token)));
  } else {
    check(dt_detokenizer_push(detok_, token), "decoding the completion");
    add(detok_text(detok_));
  }
  return stopped_;
}

void CompletionText::finish() {
  if (finished_) return;
  finished_ = true;
  if (detok_ && !stopped_) {
    check(dt_detokenizer_finish(detok_), "decoding the completion");
    add(detok_text(detok_));
  }
}

std::string CompletionText::take() {
  const bool all = stopped_ || finished_;
  size_t ready = all ? text_.size() : (text_.size() > hold_ ? text_.size() - hold_ : 0);
  if (!all) ready = utf8_complete(text_, ready);
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

}  // namespace dtcli
