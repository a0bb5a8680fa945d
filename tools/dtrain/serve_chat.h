// OpenAI's chat completions for `dtrain serve --model DIR`: a POST /v1/chat/completions body
// checked and rendered with the model's chat template (dt_tokenizer_apply_chat_template,
// add_generation_prompt), its text encoded without added special tokens (the template holds
// them). The request then runs as any completion (serve_requests.h).
#pragma once
#include <string>

#include "serve_http.h"

namespace dtcli {

// Checks the body against the model; throws HttpError: 400 naming the field (messages of the
// wrong shape, the template's own error such as roles that do not alternate, a model without
// a chat template, context_length_exceeded), 404 for another model. max_tokens (or
// max_completion_tokens) defaults to what the context and the KV cache leave; logprobs
// (bool) and top_logprobs as OpenAI's chat takes them.
CompletionRequest parse_chat(const std::string& body, const ServedModel& m);

}  // namespace dtcli
