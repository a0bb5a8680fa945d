#include "serve_requests.h"

#include <algorithm>
#include <mutex>
#include <numeric>
#include <set>

#include "cli.h"
#include "serve_responses.h"

namespace dtcli {
namespace {

std::atomic<int64_t> g_in_flight{0};

struct Group;

// One choice: a dt_server request. Lives in its group until the group goes.
struct Choice {
  Choice(const ServedModel& model, const CompletionRequest& req, int i) : index(i), text(model, req.stop) {}
  int index;
  CompletionText text;
  std::vector<int32_t> tokens;  // generated, through the one that completed a stop string
  TokenLogprobs lp;             // per token, when asked
  std::string finish;           // "" while running
  bool ended = false, opened = false;  // opened: its first chunk went out
  size_t streamed_lp = 0;              // logprob entries already streamed
  std::shared_ptr<Group> keep;         // the group lives while a choice runs
};

std::mutex g_registry_mu;
std::set<Group*> g_registry;  // groups with choices running (cut_off_completions)

struct Group {
  Group(dt_server* s, const ServedModel& model, bool is_chat, const CompletionRequest& req,
        std::shared_ptr<http::Exchange> exchange, std::string id)
      : server(s), m(model), chat(is_chat), r(req), ex(std::move(exchange)),
        shape{std::move(id), model.name, is_chat, req.include_usage, unix_seconds()} {
    ++g_in_flight;
    std::lock_guard<std::mutex> lk(g_registry_mu);
    g_registry.insert(this);
  }
  ~Group() {
    {
      std::lock_guard<std::mutex> lk(g_registry_mu);
      g_registry.erase(this);
    }
    --g_in_flight;
  }

  dt_server* server;
  const ServedModel& m;  // the server's, alive as long as dt_server is
  const bool chat;
  const CompletionRequest r;
  std::shared_ptr<http::Exchange> ex;
  const Shape shape;
  std::mutex mu;  // everything below
  std::vector<std::unique_ptr<Choice>> choices;
  std::vector<int64_t> ids;  // the dt_server requests
  int running = 0;
  bool answered = false;  // the exchange has its whole answer (or the client is gone)
  std::string cut_reason;  // cut_off_completions' why

  void cancel_all() {
    for (int64_t id : ids) dt_server_cancel(server, id);  // NOT_FOUND for those already ended
  }

  void token(Choice& c, int64_t rid, int32_t t, const TokenLogprobs* lp) {
    if (!c.finish.empty()) return;  // after its stop string
    c.tokens.push_back(t);
    if (lp) c.lp.append(*lp);
    if (c.text.push(t)) {
      c.finish = "stop";
      dt_server_cancel(server, rid);
    }
    if (r.stream) emit(c);
  }

  void end(Choice& c, int32_t state, const char* reason) {
    c.text.finish();
    c.ended = true;
    --running;
    if (c.finish.empty()) {
      if (state == DT_REQUEST_FINISHED) {
        const bool eos = !c.tokens.empty() && std::count(m.eos_ids.begin(), m.eos_ids.end(), c.tokens.back());
        c.finish = eos ? "stop" : "length";
      } else if (state == DT_REQUEST_REJECTED) {
        fail(HttpError{400, std::string("the server cannot run this request: ") + reason, "invalid_request_error", "", "rejected"});
      } else {
        fail(HttpError{503, !cut_reason.empty() ? cut_reason : std::string("the request was cut off: ") + reason,
                       "server_error", "", "cut_off"});
      }
    }
    if (r.stream) emit(c);
    if (running == 0) complete();
  }

  // The first failure answers for the whole request; the other choices are cancelled.
  void fail(const HttpError& e) {
    if (answered) return;
    answered = true;
    cancel_all();
    if (!r.stream) return ex->respond(e.status, "application/json", e.body());
    ex->send(sse_event(nlohmann::json::parse(e.body())) + "data: [DONE]\n\n");
    ex->end_stream();
  }

  void client_gone() {
    std::lock_guard<std::mutex> lk(mu);
    answered = true;
    cancel_all();
  }

  void cut_off(const std::string& why) {
    std::lock_guard<std::mutex> lk(mu);
    cut_reason = why;
    cancel_all();
  }

  // Streams what a choice has ready: its text, the log-probabilities of its new tokens, and
  // at its end the finish reason.
  void emit(Choice& c) {
    if (answered) return;
    std::string events;
    if (!c.opened) {
      c.opened = true;
      if (chat) events += sse_event(chat_chunk(shape, c.index, {{"role", "assistant"}, {"content", ""}}, nullptr, ""));
      else if (r.echo) events += sse_event(text_chunk(shape, c.index, r.prompt_text, nullptr, ""));
    }
    const std::string piece = c.text.take();
    const size_t upto = std::min<size_t>(static_cast<size_t>(c.text.tokens()), c.lp.size());
    const bool new_lp = r.logprobs >= 0 && upto > c.streamed_lp;
    if (!piece.empty() || new_lp) {
      const nlohmann::json lp = new_lp ? logprobs_json(m, chat, c.tokens, c.lp, c.streamed_lp, upto, 0)
                                       : nlohmann::json(nullptr);
      c.streamed_lp = upto;
      events += sse_event(chat ? chat_chunk(shape, c.index, {{"content", piece}}, lp, "")
                               : text_chunk(shape, c.index, piece, lp, ""));
    }
    if (c.ended)
      events += sse_event(chat ? chat_chunk(shape, c.index, nlohmann::json::object(), nullptr, c.finish)
                               : text_chunk(shape, c.index, "", nullptr, c.finish));
    ex->send(events);
  }

  int64_t completion_tokens() const {
    int64_t n = 0;
    for (const auto& c : choices) n += c->text.tokens();
    return n;
  }

  void complete() {
    if (answered) return;
    answered = true;
    const int64_t prompt = static_cast<int64_t>(r.prompt.size()), gen = completion_tokens();
    if (r.stream) {
      std::string tail;
      if (r.include_usage) tail += sse_event(usage_chunk(shape, prompt, gen));
      ex->send(tail + "data: [DONE]\n\n");
      return ex->end_stream();
    }
    // best_of: the n with the highest log-probability (OpenAI's "best"), renumbered.
    std::vector<Choice*> order;
    for (auto& c : choices) order.push_back(c.get());
    if (r.best_of > r.n) {
      std::stable_sort(order.begin(), order.end(), [](const Choice* a, const Choice* b) { return a->lp.sum() > b->lp.sum(); });
      order.resize(static_cast<size_t>(r.n));
    }
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < order.size(); ++i) {
      Choice& c = *order[i];
      const size_t k = static_cast<size_t>(c.text.tokens());
      const nlohmann::json lp = r.logprobs >= 0 ? logprobs_json(m, chat, c.tokens, c.lp, 0, std::min(k, c.lp.size()),
                                                                 r.echo ? r.prompt_text.size() : 0)
                                                : nlohmann::json(nullptr);
      out.push_back(chat ? chat_choice(static_cast<int>(i), c.text.text(), lp, c.finish)
                         : text_choice(static_cast<int>(i), (r.echo ? r.prompt_text : "") + c.text.text(), lp, c.finish));
    }
    ex->respond(200, "application/json", dump(whole_response(shape, out, prompt, gen)));
  }
};

// The dt_server callback, on the server's thread.
void on_event(void* user, int64_t rid, int32_t token, int32_t done, int32_t state, const char* reason) {
  Choice& c = *static_cast<Choice*>(user);
  std::shared_ptr<Group> keep;  // released after the lock: the group may end with it
  Group& g = *c.keep;
  std::lock_guard<std::mutex> lk(g.mu);
  try {
    TokenLogprobs lp;
    const bool with_lp = token >= 0 && (g.r.logprobs >= 0 || g.r.best_of > g.r.n);
    if (with_lp) {  // this event's log-probabilities, read inside the callback
      float chosen = 0, top_lp[kMaxLogprobs];
      int32_t top_id[kMaxLogprobs], k = 0;
      check(dt_server_event_logprobs(g.server, &chosen, top_id, top_lp, static_cast<int32_t>(std::max<int64_t>(g.r.logprobs, 0)), &k),
            "dt_server_event_logprobs");
      lp.chosen.push_back(chosen);
      lp.top.emplace_back();
      for (int32_t i = 0; i < k; ++i) lp.top.back().emplace_back(top_id[i], top_lp[i]);
    }
    if (token >= 0) g.token(c, rid, token, with_lp ? &lp : nullptr);
    if (done) g.end(c, state, reason);
  } catch (const std::exception& e) {  // decoding failed: the request ends with a 500
    g.fail(HttpError{500, e.what(), "server_error", "", ""});
    if (!done) dt_server_cancel(g.server, rid);
  }
  if (done) keep = std::move(c.keep);
}

Options submit_options(const CompletionRequest& r, const ServedModel& m, int index) {
  Options o = make_options();
  set(o.get(), "max_tokens", r.max_tokens);
  set(o.get(), "temperature", r.temperature);
  set(o.get(), "top_p", r.top_p);
  set(o.get(), "top_k", r.top_k);
  set(o.get(), "seed", static_cast<int64_t>(r.seed + static_cast<uint64_t>(index)));  // each choice its own draw
  if (r.presence_penalty != 0) set(o.get(), "presence_penalty", r.presence_penalty);
  if (r.frequency_penalty != 0) set(o.get(), "frequency_penalty", r.frequency_penalty);
  if (r.repetition_penalty != 1) set(o.get(), "repetition_penalty", r.repetition_penalty);
  if (!r.logit_bias.empty()) set(o.get(), "logit_bias", r.logit_bias);
  // best_of ranks the choices by their log-probability: it needs them even when not asked.
  if (r.logprobs >= 0 || r.best_of > r.n) set(o.get(), "logprobs", std::max<int64_t>(r.logprobs, 0));
  std::string stop_ids;
  if (m.tokenizer) {
    for (int32_t t : m.eos_ids) stop_ids += (stop_ids.empty() ? "" : ",") + std::to_string(t);
  } else {
    // A one-byte stop string is also a stop token, so the engine ends the request at once.
    for (const std::string& s : r.stop)
      if (s.size() == 1) stop_ids += (stop_ids.empty() ? "" : ",") + std::to_string(static_cast<unsigned char>(s[0]));
  }
  if (!stop_ids.empty()) set(o.get(), "stop_tokens", stop_ids);
  return o;
}

}  // namespace

void start_completion(dt_server* server, const ServedModel& m, bool chat, const CompletionRequest& r,
                      const std::shared_ptr<http::Exchange>& ex, const std::string& id) {
  auto g = std::make_shared<Group>(server, m, chat, r, ex, id);
  {
    // Held while submitting: the choices' first events wait until the stream has started.
    std::lock_guard<std::mutex> lk(g->mu);
    for (int i = 0; i < r.best_of; ++i) {
      g->choices.push_back(std::make_unique<Choice>(m, r, i));
      Choice* c = g->choices.back().get();
      c->keep = g;  // before the submit: its callback may run before the submit returns
      Options o = submit_options(r, m, i);
      int64_t rid = 0;
      const dt_status st = dt_server_submit(server, r.prompt.data(), static_cast<int64_t>(r.prompt.size()), o.get(),
                                            on_event, c, &rid);
      if (st != DT_OK) {
        c->keep.reset();
        const HttpError e = st == DT_ERR_UNAVAILABLE ? HttpError{503, dt_last_error_message(), "server_error", "", "unavailable"}
                                                     : serve::bad("", dt_last_error_message());
        if (i == 0) throw e;
        g->fail(e);
        break;
      }
      g->ids.push_back(rid);
      ++g->running;
      if (i == 0 && r.stream) ex->start_stream("text/event-stream", {{"Cache-Control", "no-cache"}});
    }
  }
  std::weak_ptr<Group> w = g;
  ex->on_gone([w] {
    if (auto gr = w.lock()) gr->client_gone();
  });
}

int64_t completions_in_flight() { return g_in_flight; }

void cut_off_completions(const std::string& why) {
  std::lock_guard<std::mutex> lk(g_registry_mu);
  for (Group* g : g_registry) g->cut_off(why);
}

}  // namespace dtcli
