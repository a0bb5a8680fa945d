// The OpenAI-compatible completions API of `dtrain serve`, over a dt_server: parsing and
// checking a request body, and one completion's text as it comes, with OpenAI's stop strings
// applied to the text. The text side is the served model's: a checkpoint's bytes (each token
// is a byte), or with `--model DIR` the Hugging Face tokenizer (dt_tokenizer; the text comes
// from a dt_detokenizer and generation ends at the model's end-of-sequence ids).
#pragma once
#include <dtrain/dtrain.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dtcli {

// A request the server refuses: the HTTP status and an OpenAI-style error body.
struct HttpError {
  int status;
  std::string message, type, param, code;
  std::string body() const;
};

// What a request is checked against.
struct ServedModel {
  std::string name;                       // the model's name in the API
  int64_t context = 0, vocab = 0;         // dt_server_model_info
  int64_t kv_positions = 0;               // KV cache positions per replica
  dt_tokenizer* tokenizer = nullptr;      // --model: the model's tokenizer; null: bytes
  std::vector<int32_t> eos_ids;           // --model: where generation ends (dt_tokenizer_info_json)
};

struct CompletionRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
  double temperature = 1.0, top_p = 1.0;  // OpenAI's defaults
  int64_t top_k = 0, seed = 0;
  std::vector<std::string> stop;
  bool stream = false, include_usage = false;  // stream_options.include_usage
};

// Checks a POST /v1/completions body against the model (its name, context, vocabulary and
// tokenizer) and the KV cache; throws HttpError (400, or 404 for another model) naming the
// field. A string prompt is the model's tokens of it (with a tokenizer: add_special_tokens,
// as transformers' tokenizer(prompt)), or its bytes.
CompletionRequest parse_completion(const std::string& body, const ServedModel& m);

// One completion in flight: submits it (polled, no callback), then each advance() waits up
// to timeout_ms for tokens and returns the text that can be released (held back while it
// could still be the start of a stop string). cancel() ends it early.
class Completion {
 public:
  Completion(dt_server* server, const ServedModel& m, const CompletionRequest& r);  // throws HttpError (503 when draining)
  ~Completion();
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;
  std::string advance(int32_t timeout_ms);
  bool done() const { return done_; }
  // "stop" (a stop string or an end-of-sequence token), "length", "abort", or "rejected"
  // (the engine found it can never run).
  const std::string& finish_reason() const { return finish_; }
  // Tokens generated up to the end (through the one that completed a stop string).
  int64_t completion_tokens() const { return tokens_; }
  int64_t prompt_tokens() const { return prompt_tokens_; }
  void cancel();

 private:
  void take(int32_t token);  // one new token's text into text_

  dt_server* server_;
  dt_detokenizer* detok_ = nullptr;  // with a tokenizer
  int64_t id_ = 0, tokens_ = 0, prompt_tokens_ = 0;
  std::vector<std::string> stop_;
  std::vector<int32_t> stop_ids_;  // tokens that end the request ("stop")
  int32_t last_token_ = -1;
  size_t hold_ = 0, sent_ = 0;
  std::string text_, finish_;
  bool done_ = false, forgotten_ = false;
};

// The response objects: a whole completion, and one streamed chunk (finish: "" while going).
nlohmann::json completion_json(const std::string& id, const std::string& model, const std::string& text,
                               const std::string& finish, int64_t prompt_tokens, int64_t completion_tokens);
nlohmann::json chunk_json(const std::string& id, const std::string& model, const std::string& text,
                          const std::string& finish);
nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens);
int64_t unix_seconds();

// Helpers the chat endpoint shares (serve_chat.cc).
namespace serve {
HttpError bad(const std::string& param, const std::string& message, const std::string& code = "");
// The body as a JSON object, or HttpError 400.
nlohmann::json parse_body(const std::string& body);
// Fields OpenAI defines that this server does not implement: accepted only with the value
// that means "not used", so a client that sends its defaults works.
bool neutral(const std::string& key, const nlohmann::json& v);
// "model": this server's, else 404 model_not_found.
void check_model(const nlohmann::json& j, const std::string& model_name);
// Sampling, stop, stream and stream_options, read into r (max_tokens not included).
void parse_sampling(const nlohmann::json& j, const ServedModel& m, CompletionRequest& r);
// The prompt plus r.max_tokens must fit the context and the KV cache; `param` names the
// prompt's field.
void check_fits(const ServedModel& m, const CompletionRequest& r, const std::string& param);
double number(const nlohmann::json& v, const std::string& key, double lo, double hi, const std::string& accepted);
int64_t integer(const nlohmann::json& v, const std::string& key, int64_t lo, int64_t hi, const std::string& accepted);
std::string dump(const nlohmann::json& j);
}  // namespace serve

}  // namespace dtcli
