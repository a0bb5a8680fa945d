// dt_server: the serving engine (lib/serve) behind the C ABI. The server runs on its own
// layout of the module over the mesh (parallel/layout.h: the replicas, tp parts and
// pipeline stages), with no optimizer or training engine; serve::Server owns the thread.
#include <cmath>
#include <cstring>

#include "comm/mesh.h"
#include "engine/trainer.h"
#include "parallel/layout.h"
#include "lib/api/firewall.h"
#include "lib/api/sampling_keys.h"
#include "nn/gpt.h"
#include "serve/server.h"

using dt::api::guard;
using dt::api::need;

struct dt_server {
  std::shared_ptr<dt::nn::Module> module;
  std::shared_ptr<dt::comm::Mesh> mesh;
  std::unique_ptr<dt::parallel::Layout> layout;
  std::unique_ptr<dt::serve::Server> server;  // last: stopped first
};

static_assert(DT_REQUEST_WAITING == static_cast<int>(dt::serve::SeqState::Waiting) &&
                  DT_REQUEST_PREEMPTED == static_cast<int>(dt::serve::SeqState::Preempted) &&
                  DT_REQUEST_REJECTED == static_cast<int>(dt::serve::SeqState::Rejected),
              "DT_REQUEST_* follow serve::SeqState");

namespace {

dt::serve::Server& server_of(dt_server* s) { return *need(s, "server")->server; }

dt::serve::EngineConfig engine_config(const dt_options* options, dt::engine::ParallelOptions& par) {
  dt::OptionReader r(dt::api::opts_of(options), "dt_server_create",
                     {"block_size", "kv_blocks", "kv_cache_bytes", "max_num_seqs", "max_batched_tokens",
                      "prefix_caching", "pp_blocks"});
  dt::serve::EngineConfig c;
  c.block_size = r.get_int("block_size", c.block_size);
  c.num_blocks = r.get_int("kv_blocks", 0);
  c.kv_cache_bytes = r.get_int("kv_cache_bytes", c.kv_cache_bytes);
  c.max_num_seqs = r.get_int("max_num_seqs", c.max_num_seqs);
  c.max_batched_tokens = r.get_int("max_batched_tokens", c.max_batched_tokens);
  c.prefix_caching = r.get_bool("prefix_caching", true);
  if (r.has("pp_blocks"))
    par.pp_blocks = dt::engine::parse_block_counts(r.get_string("pp_blocks", ""), "option \"pp_blocks\"");
  c.check();
  return c;
}

dt::serve::SamplingParams sampling(const dt_options* options) {
  dt::OptionReader r(dt::api::opts_of(options), "dt_server_submit",
                     {"max_tokens", "temperature", "top_k", "top_p", "seed", "stop_tokens", "presence_penalty",
                      "frequency_penalty", "repetition_penalty", "logit_bias", "logprobs"});
  dt::serve::SamplingParams p;
  p.max_tokens = r.get_int("max_tokens", p.max_tokens);
  dt::api::read_sampling(r, p);
  dt::api::read_stop_tokens(r, p.stop_tokens);
  dt::api::read_logits_adjust(r, p.adjust, p.logprobs);
  return p;
}

// The event a dt_request_callback is being called with, on this (the server's) thread:
// what dt_server_event_logprobs reads.
struct CurrentEvent {
  const dt_server* server = nullptr;
  const dt::serve::Event* event = nullptr;
};
thread_local CurrentEvent current_event;

// One token's log-probability and its row of `stride` alternatives: min(k, stride) of them,
// the rest of the row -1 / -inf, so a caller's fixed-size rows are always fully written.
void write_logprobs(const dt::engine::TokenLogprobs& lp, float* logprob, int32_t* top_ids, float* top_logprobs,
                    int64_t stride) {
  if (logprob) *logprob = lp.logprob;
  for (int64_t j = 0; j < stride; ++j) {
    const bool have = j < static_cast<int64_t>(lp.top_ids.size());
    if (top_ids) top_ids[j] = have ? lp.top_ids[static_cast<size_t>(j)] : -1;
    if (top_logprobs) top_logprobs[j] = have ? lp.top_logprobs[static_cast<size_t>(j)] : -INFINITY;
  }
}

}  // namespace

extern "C" {

dt_status dt_server_create(dt_mesh* mesh, dt_module* module, const dt_options* options, dt_server** out) {
  return guard("dt_server_create", [&] {
    need(module, "module");
    need(out, "out");
    DT_CHECK(module->gpt, "module is not a GPT (an MLP?); accepted: a module from dt_module_create_gpt");
    auto h = std::make_unique<dt_server>();
    h->module = module->module;
    h->mesh = mesh ? mesh->mesh : nullptr;
    dt::engine::ParallelOptions par;
    const dt::serve::EngineConfig cfg = engine_config(options, par);
    par.check();
    h->layout = std::make_unique<dt::parallel::Layout>(h->mesh, *module->gpt, par.layout());
    auto engine = std::make_unique<dt::serve::ServingEngine>(dt::serve::layout_runner(*h->layout), cfg);
    h->server = std::make_unique<dt::serve::Server>(std::move(engine));
    *out = h.release();
  });
}

void dt_server_destroy(dt_server* server) { delete server; }

dt_status dt_server_submit(dt_server* server, const int32_t* prompt, int64_t prompt_len, const dt_options* options,
                           dt_request_callback on_event, void* user, int64_t* out_id) {
  return guard("dt_server_submit", [&] {
    dt::serve::Server& s = server_of(server);
    need(out_id, "out_id");
    DT_CHECK(prompt_len >= 1 && prompt_len <= (int64_t{1} << 24),
             "prompt_len = " + std::to_string(prompt_len) + "; accepted: [1, 2^24]");
    need(prompt, "prompt");
    dt::serve::Server::Callback cb;
    if (on_event)
      cb = [on_event, user, server](const dt::serve::Event& e) {
        current_event = {server, &e};
        on_event(user, e.id, e.token, e.done ? 1 : 0, static_cast<int32_t>(e.state), e.reason.c_str());
        current_event = {};
      };
    *out_id = s.submit(std::vector<int32_t>(prompt, prompt + prompt_len), sampling(options), std::move(cb));
  });
}

dt_status dt_server_poll(dt_server* server, int64_t request_id, int32_t* tokens, int64_t capacity, int64_t* n_out,
                         int32_t* state_out, int32_t* done_out, int32_t timeout_ms) {
  return guard("dt_server_poll", [&] {
    dt::serve::Server& s = server_of(server);
    need(n_out, "n_out");
    DT_CHECK(capacity >= 0 && (capacity == 0 || tokens), "tokens/capacity: a buffer of capacity >= 0 ids");
    DT_CHECK(timeout_ms >= 0, "timeout_ms = " + std::to_string(timeout_ms) + "; accepted: >= 0");
    const dt::serve::Server::Polled p = s.poll(request_id, capacity, timeout_ms / 1000.0);
    if (!p.tokens.empty()) std::memcpy(tokens, p.tokens.data(), p.tokens.size() * sizeof(int32_t));
    *n_out = static_cast<int64_t>(p.tokens.size());
    if (state_out) *state_out = static_cast<int32_t>(p.state);
    if (done_out) *done_out = p.done ? 1 : 0;
  });
}

dt_status dt_server_poll_logprobs(dt_server* server, int64_t request_id, int32_t* tokens, float* logprobs,
                                  int32_t* top_ids, float* top_logprobs, int32_t top_stride, int64_t capacity,
                                  int64_t* n_out, int32_t* state_out, int32_t* done_out, int32_t timeout_ms) {
  return guard("dt_server_poll_logprobs", [&] {
    dt::serve::Server& s = server_of(server);
    need(n_out, "n_out");
    DT_CHECK(capacity >= 0 && (capacity == 0 || tokens), "tokens/capacity: a buffer of capacity >= 0 ids");
    DT_CHECK(top_stride >= 0 && top_stride <= dt::engine::kMaxLogprobs,
             "top_stride = " + std::to_string(top_stride) + "; accepted: [0, " +
                 std::to_string(dt::engine::kMaxLogprobs) + "]");
    DT_CHECK(top_stride == 0 || capacity == 0 || (top_ids && top_logprobs),
             "top_ids/top_logprobs: NULL with top_stride = " + std::to_string(top_stride) +
                 "; accepted: buffers of capacity x top_stride, or top_stride = 0");
    DT_CHECK(timeout_ms >= 0, "timeout_ms = " + std::to_string(timeout_ms) + "; accepted: >= 0");
    // Refused before anything is taken, so a mistaken call loses no tokens.
    if (s.logprobs_of(request_id) < 0)
      dt::invalid("request " + std::to_string(request_id) +
                  " was submitted without \"logprobs\"; read it with dt_server_poll, or submit with \"logprobs\" >= 0");
    const dt::serve::Server::Polled p = s.poll(request_id, capacity, timeout_ms / 1000.0);
    for (size_t i = 0; i < p.tokens.size(); ++i) {
      tokens[i] = p.tokens[i];
      DT_ASSERT(p.logprobs[i]);
      const size_t row = i * static_cast<size_t>(top_stride);
      write_logprobs(*p.logprobs[i], logprobs ? logprobs + i : nullptr, top_ids ? top_ids + row : nullptr,
                     top_logprobs ? top_logprobs + row : nullptr, top_stride);
    }
    *n_out = static_cast<int64_t>(p.tokens.size());
    if (state_out) *state_out = static_cast<int32_t>(p.state);
    if (done_out) *done_out = p.done ? 1 : 0;
  });
}

dt_status dt_server_event_logprobs(dt_server* server, float* logprob, int32_t* top_ids, float* top_logprobs,
                                   int32_t capacity, int32_t* n_out) {
  return guard("dt_server_event_logprobs", [&] {
    need(server, "server");
    DT_CHECK(capacity >= 0 && (capacity == 0 || (top_ids && top_logprobs)),
             "top_ids/top_logprobs/capacity: buffers of capacity >= 0 entries");
    const CurrentEvent& c = current_event;
    if (c.server != server || !c.event)
      dt::invalid("dt_server_event_logprobs: called outside a dt_request_callback of this server");
    if (!c.event->logprobs)
      dt::fail(DT_ERR_NOT_FOUND, "request " + std::to_string(c.event->id) +
                                     ": this event has no log-probabilities (no token, or submitted without "
                                     "\"logprobs\")");
    const dt::engine::TokenLogprobs& lp = *c.event->logprobs;
    const int64_t n = std::min<int64_t>(capacity, static_cast<int64_t>(lp.top_ids.size()));
    write_logprobs(lp, logprob, top_ids, top_logprobs, n);
    if (n_out) *n_out = static_cast<int32_t>(n);
  });
}

dt_status dt_server_cancel(dt_server* server, int64_t request_id) {
  return guard("dt_server_cancel", [&] {
    if (!server_of(server).cancel(request_id))
      dt::fail(DT_ERR_NOT_FOUND, "request " + std::to_string(request_id) + ": unknown or already ended");
  });
}

dt_status dt_server_drain(dt_server* server, int32_t timeout_ms) {
  return guard("dt_server_drain", [&] {
    DT_CHECK(timeout_ms >= 0, "timeout_ms = " + std::to_string(timeout_ms) + "; accepted: >= 0");
    if (!server_of(server).drain(timeout_ms / 1000.0))
      dt::fail(DT_ERR_TIMEOUT, "dt_server_drain: requests still in flight after " + std::to_string(timeout_ms) + " ms");
  });
}

dt_status dt_server_stats_json(dt_server* server, char* buf, size_t capacity, size_t* needed) {
  return guard("dt_server_stats_json",
               [&] { dt::api::write_text(server_of(server).stats_json().dump(), buf, capacity, needed); });
}

dt_status dt_server_metrics_text(dt_server* server, char* buf, size_t capacity, size_t* needed) {
  return guard("dt_server_metrics_text",
               [&] { dt::api::write_text(server_of(server).prometheus(), buf, capacity, needed); });
}

dt_status dt_server_model_info(dt_server* server, int64_t* context, int64_t* vocab_size) {
  return guard("dt_server_model_info", [&] {
    const dt::nn::GPTConfig& c = server_of(server).config();
    if (context) *context = c.context;
    if (vocab_size) *vocab_size = c.vocab_size;
  });
}

}  // extern "C"
