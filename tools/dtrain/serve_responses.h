// The JSON shapes of OpenAI's completions and chat completions that `dtrain serve` answers
// with: whole responses, streamed chunks (server-sent events), usage, and log-probabilities
// ("text_completion" keeps tokens / token_logprobs / top_logprobs / text_offset; chat keeps
// content: [{token, logprob, bytes, top_logprobs}]). Declared once here for both endpoints.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve_http.h"

namespace dtcli {

// What every object of one response repeats.
struct Shape {
  std::string id, model;
  bool chat = false, with_usage = false;  // with_usage: chunks carry "usage": null
  int64_t created = 0;
};

// Per generated token: its log-probability and the top alternatives (id, log-probability).
struct TokenLogprobs {
  std::vector<float> chosen;
  std::vector<std::vector<std::pair<int32_t, float>>> top;
  size_t size() const { return chosen.size(); }
  double sum() const;
  void append(const TokenLogprobs& o);
};

std::string dump(const nlohmann::json& j);  // invalid UTF-8 replaced, never thrown
std::string sse_event(const nlohmann::json& j);  // "data: {...}\n\n"

// Tokens [from, to) of a choice: completions' or chat's logprobs object. offset0: where the
// first token's text starts in the choice's text (the echoed prompt's length).
nlohmann::json logprobs_json(const ServedModel& m, bool chat, const std::vector<int32_t>& tokens, const TokenLogprobs& lp,
                             size_t from, size_t to, size_t offset0);

nlohmann::json text_choice(int index, const std::string& text, const nlohmann::json& logprobs, const std::string& finish);
nlohmann::json chat_choice(int index, const std::string& content, const nlohmann::json& logprobs, const std::string& finish);
nlohmann::json whole_response(const Shape& s, const nlohmann::json& choices, int64_t prompt_tokens, int64_t completion_tokens);

// Streamed chunks; finish "" while the choice is going.
nlohmann::json text_chunk(const Shape& s, int index, const std::string& text, const nlohmann::json& logprobs,
                          const std::string& finish);
nlohmann::json chat_chunk(const Shape& s, int index, const nlohmann::json& delta, const nlohmann::json& logprobs,
                          const std::string& finish);
// stream_options.include_usage: the chunk after the last, with no choices.
nlohmann::json usage_chunk(const Shape& s, int64_t prompt_tokens, int64_t completion_tokens);

}  // namespace dtcli
