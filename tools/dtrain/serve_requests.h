// A completion request in flight behind `dtrain serve`: its n (or best_of) choices run as
// requests of the dt_server, their tokens pushed by the server's callback (no thread waits
// on a request), and the answer goes out through the HTTP exchange, whole or as server-sent
// events, in OpenAI's "text_completion" or "chat.completion" shapes.
//
// How a request ends, and what the client sees:
// - every choice finished: finish_reason "stop" (a stop string, or an end-of-sequence token
//   last) or "length";
// - the client went away (a reset, or a stream write that failed): every choice is
//   cancelled at once and its KV blocks freed;
// - cut off (the drain deadline, a second Ctrl-C, the engine failed): a whole answer is a
//   503; a stream gets an error event and [DONE] (OpenAI's clients raise it);
// - the engine found it can never run (the KV cache too small): 400, or the error event.
#pragma once
#include <atomic>
#include <memory>
#include <string>

#include "http_server.h"
#include "serve_http.h"

namespace dtcli {

// Starts a parsed request (throws HttpError when the server refuses it: 503 while draining).
// chat: POST /v1/chat/completions, else /v1/completions.
void start_completion(dt_server* server, const ServedModel& m, bool chat, const CompletionRequest& r,
                      const std::shared_ptr<http::Exchange>& ex, const std::string& id);

// Requests started and not yet answered (the drain waits for them; --max-pending bounds them).
int64_t completions_in_flight();

// Cuts off every request in flight (shutdown): each gets its error answer, as above.
void cut_off_completions(const std::string& why);

}  // namespace dtcli
