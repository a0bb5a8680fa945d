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

constexpr int64_t kMaxChoices = 16;   // n and best_of
constexpr int64_t kMaxLogprobs = 20;  // alternatives per token

struct CompletionRequest {
  std::vector<int32_t> prompt;
  std::string prompt_text;                // the prompt as text (echo)
  int64_t max_tokens = 16;
  double temperature = 1.0, top_p = 1.0;  // OpenAI's defaults
  int64_t top_k = 0;
  uint64_t seed = 0;                      // random unless the request gives one
  std::vector<std::string> stop;
  bool stream = false, include_usage = false;  // stream_options.include_usage
  int64_t n = 1, best_of = 1;             // choices returned, and sampled (the best n by log-probability)
  int64_t logprobs = -1;                  // -1: none; k >= 0: each token's and the top k alternatives'
  bool echo = false;                      // completions: the prompt's text before the completion's
  double presence_penalty = 0, frequency_penalty = 0, repetition_penalty = 1;
  std::string logit_bias;                 // "id:bias,..." as dt_server_submit takes it
};

// The JSON body of a request, checked before it is parsed (nlohmann's DOM recurses and costs
// tens of bytes per value, so a small body of "[[[[..." or of tiny values would exhaust the
// stack or the memory): at most 64 levels deep and one value per 4 bytes of body, no key
// twice in one object (JSON leaves it undefined which one counts). Throws HttpError 400.
nlohmann::json parse_request_json(const std::string& body);

// Checks a POST /v1/completions body against the model (its name, context, vocabulary and
// tokenizer) and the KV cache; throws HttpError (400, or 404 for another model) naming the
// field. A string prompt is the model's tokens of it (with a tokenizer: add_special_tokens,
// as transformers' tokenizer(prompt)), or its bytes.
CompletionRequest parse_completion(const std::string& body, const ServedModel& m);

// One choice's text as its tokens arrive (pushed, on the server's thread): the detokenizer's
// text (with a tokenizer) or the tokens as bytes, cut before the first stop string, and
// released only when it can no longer be the start of one and ends on a whole UTF-8
// character. Not thread-safe: one thread pushes and takes.
class CompletionText {
 public:
  CompletionText(const ServedModel& m, const std::vector<std::string>& stop);  // throws HttpError 500
  ~CompletionText();
  CompletionText(const CompletionText&) = delete;
  CompletionText& operator=(const CompletionText&) = delete;
  // One new token; true when it completed a stop string (the text ends before it, and later
  // tokens are ignored).
  bool push(int32_t token);
  // The request ended: what the detokenizer held back is added, everything is released.
  void finish();
  std::string take();  // the text released since the last take
  bool stopped() const { return stopped_; }
  int64_t tokens() const { return tokens_; }  // pushed, up to the one that completed a stop string
  const std::string& text() const { return text_; }

 private:
  dt_detokenizer* detok_ = nullptr;
  std::vector<std::string> stop_;
  size_t hold_ = 0, sent_ = 0;
  std::string text_;
  int64_t tokens_ = 0;
  bool stopped_ = false, finished_ = false;
  void add(const std::string& piece);  // appends, and cuts at a stop string it completes
};

// The text of one token alone (a checkpoint's byte, or the tokenizer's piece): logprobs'
// "tokens" and "top_logprobs" keys.
std::string token_text(const ServedModel& m, int32_t token);

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens);
int64_t unix_seconds();

// Helpers the chat endpoint shares (serve_chat.cc).
namespace serve {
HttpError bad(const std::string& param, const std::string& message, const std::string& code = "");
// The body as a JSON object (parse_request_json), or HttpError 400.
nlohmann::json parse_body(const std::string& body);
// Fields OpenAI defines that this server does not implement: accepted only with the value
// that means "not used", so a client that sends its defaults works.
bool neutral(const std::string& key, const nlohmann::json& v);
// "model": this server's, else 404 model_not_found.
void check_model(const nlohmann::json& j, const std::string& model_name);
// Sampling (temperature, top_p, top_k, seed, penalties, logit_bias), stop, n, best_of,
// stream and stream_options, read into r (max_tokens, logprobs and echo not included).
void parse_sampling(const nlohmann::json& j, const ServedModel& m, CompletionRequest& r);
// max_tokens (or, for chat, max_completion_tokens): given, it must fit with the prompt;
// absent, `fallback` capped by what the context and the KV cache leave (at least 1).
void parse_max_tokens(const nlohmann::json& j, const ServedModel& m, CompletionRequest& r, int64_t fallback);
// The prompt plus r.max_tokens must fit the context and the KV cache; `param` names the
// prompt's field.
void check_fits(const ServedModel& m, const CompletionRequest& r, const std::string& param);
double number(const nlohmann::json& v, const std::string& key, double lo, double hi, const std::string& accepted);
int64_t integer(const nlohmann::json& v, const std::string& key, int64_t lo, int64_t hi, const std::string& accepted);
}  // namespace serve

}  // namespace dtcli
