// OpenAI's chat completions for `dtrain serve --model DIR`: a POST /v1/chat/completions body
// checked and rendered with the model's chat template (dt_tokenizer_apply_chat_template,
// add_generation_prompt), its text encoded without added special tokens (the template holds
// them); the response and the streamed chunks in OpenAI's "chat.completion" shapes. The
// tokens themselves run as a Completion (serve_http.h).
#pragma once
#include <string>

#include "serve_http.h"

namespace dtcli {

// Checks the body against the model; throws HttpError: 400 naming the field (messages of the
// wrong shape, the template's own error such as roles that do not alternate, a model without
// a chat template, context_length_exceeded), 404 for another model. max_tokens (or
// max_completion_tokens) defaults to what the context and the KV cache leave.
CompletionRequest parse_chat(const std::string& body, const ServedModel& m);

// {"id":"chatcmpl-N","object":"chat.completion",...,"choices":[{"index":0,"message":
// {"role":"assistant","content":..},"finish_reason":..}],"usage":{..}}.
nlohmann::json chat_completion_json(const std::string& id, const std::string& model, const std::string& content,
                                    const std::string& finish, int64_t prompt_tokens, int64_t completion_tokens);

// One "chat.completion.chunk": `delta` ({"role":"assistant","content":""} first, then
// {"content":piece}, {} with the finish reason last); finish "" while going. with_usage:
// the chunk carries "usage": null (stream_options.include_usage).
nlohmann::json chat_chunk_json(const std::string& id, const std::string& model, const nlohmann::json& delta,
                               const std::string& finish, bool with_usage);

// The chunk after the last when stream_options.include_usage: no choices, the usage.
nlohmann::json chat_usage_chunk_json(const std::string& id, const std::string& model, int64_t prompt_tokens,
                                     int64_t completion_tokens);

}  // namespace dtcli
