// The OpenAI-compatible completions API of `dtrain serve`, over a dt_server: parsing and
// checking a request body, and one completion's text as it comes (bytes are tokens: the
// checkpoint's byte-level tokenizer), with OpenAI's stop strings applied to the text.
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

struct CompletionRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
  double temperature = 1.0, top_p = 1.0;  // OpenAI's defaults
  int64_t top_k = 0, seed = 0;
  std::vector<std::string> stop;
  bool stream = false;
};

// Checks a POST /v1/completions body against the model (`model_name`, its context and
// vocabulary) and the KV cache (`kv_positions` per replica); throws HttpError (400, or 404
// for another model) naming the field.
CompletionRequest parse_completion(const std::string& body, const std::string& model_name, int64_t context,
                                   int64_t vocab_size, int64_t kv_positions);

// One completion in flight: submits it (polled, no callback), then each advance() waits up
// to timeout_ms for tokens and returns the text that can be released (held back while it
// could still be the start of a stop string). cancel() ends it early.
class Completion {
 public:
  Completion(dt_server* server, const CompletionRequest& r);  // throws HttpError (503 when draining)
  ~Completion();
  std::string advance(int32_t timeout_ms);
  bool done() const { return done_; }
  // "stop", "length", "abort", or "rejected" (the engine found it can never run).
  const std::string& finish_reason() const { return finish_; }
  int64_t completion_tokens() const { return tokens_; }
  int64_t prompt_tokens() const { return prompt_tokens_; }
  void cancel();

 private:
  dt_server* server_;
  int64_t id_ = 0, tokens_ = 0, prompt_tokens_ = 0;
  std::vector<std::string> stop_;
  size_t hold_ = 0, sent_ = 0;
  std::string text_, finish_;
  bool done_ = false, forgotten_ = false;
};

// The response objects: a whole completion, and one streamed chunk (finish: "" while going).
nlohmann::json completion_json(const std::string& id, const std::string& model, const std::string& text,
                               const std::string& finish, int64_t prompt_tokens, int64_t completion_tokens);
nlohmann::json chunk_json(const std::string& id, const std::string& model, const std::string& text,
                          const std::string& finish);

}  // namespace dtcli
