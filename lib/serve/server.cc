#include "serve/server.h"

#include <chrono>

#include "core/error.h"

namespace dt::serve {

Server::Server(std::unique_ptr<ServingEngine> engine)
    : engine_(std::move(engine)), leader_(engine_->runner().leader()) {
  thread_ = std::thread([this] { leader_ ? loop() : follow(); });
}

void Server::follow() {
  std::string error;
  try {
    engine_->runner().follow();
  } catch (const std::exception& e) {
    error = e.what();
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    failed_ = error;
    followed_ = true;
  }
  news_.notify_all();
}

Server::~Server() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

int64_t Server::submit(const std::vector<int32_t>& prompt, const SamplingParams& p, Callback cb) {
  {
    std::lock_guard<std::mutex> lk(engine_mu_);
    engine_->check_request(prompt, p);  // the engine's own checks, before anything is queued
  }
  if (!leader_)
    fail(DT_ERR_UNAVAILABLE, "server: this process follows world rank 0 (mpirun); submit requests there");
  int64_t id;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!failed_.empty()) fail(DT_ERR_UNAVAILABLE, "server: the engine failed: " + failed_);
    if (draining_ || stopping_) fail(DT_ERR_UNAVAILABLE, "server: draining, no new requests accepted");
    id = next_id_++;
    if (cb) callbacks_[id] = std::move(cb);
    else buffers_[id].logprobs = p.logprobs;
    inbox_.push_back({id, prompt, p});
    ++live_;
  }
  wake_.notify_all();
  return id;
}

bool Server::cancel(int64_t id) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    const bool live = callbacks_.count(id) || (buffers_.count(id) && !buffers_[id].ended);
    if (!live) return false;
    cancels_.push_back(id);
  }
  wake_.notify_all();
  return true;
}

namespace {
[[noreturn]] void unknown_request(int64_t id) {
  fail(DT_ERR_NOT_FOUND, "request " + std::to_string(id) + ": unknown, already fully polled, or delivered to a callback");
}
}  // namespace

int32_t Server::logprobs_of(int64_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = buffers_.find(id);
  if (it == buffers_.end()) unknown_request(id);
  return it->second.logprobs;
}

Server::Polled Server::poll(int64_t id, int64_t max_tokens, double timeout_s) {
  std::unique_lock<std::mutex> lk(mu_);
  auto unknown = [&] { unknown_request(id); };
  if (!buffers_.count(id)) unknown();
  // Looked up again after the wait: another thread polling the same id may have taken it.
  news_.wait_for(lk, std::chrono::duration<double>(std::max(0.0, timeout_s)), [&] {
    auto b = buffers_.find(id);
    return b == buffers_.end() || !b->second.p.tokens.empty() || b->second.ended;
  });
  auto it = buffers_.find(id);
  if (it == buffers_.end()) unknown();
  Buffer& b = it->second;
  Polled out;
  const size_t n = std::min(b.p.tokens.size(), static_cast<size_t>(std::max<int64_t>(max_tokens, 0)));
  out.tokens.assign(b.p.tokens.begin(), b.p.tokens.begin() + static_cast<std::ptrdiff_t>(n));
  b.p.tokens.erase(b.p.tokens.begin(), b.p.tokens.begin() + static_cast<std::ptrdiff_t>(n));
  out.logprobs.assign(b.p.logprobs.begin(), b.p.logprobs.begin() + static_cast<std::ptrdiff_t>(n));
  b.p.logprobs.erase(b.p.logprobs.begin(), b.p.logprobs.begin() + static_cast<std::ptrdiff_t>(n));
  out.state = b.p.state;
  out.reason = b.p.reason;
  out.done = b.ended && b.p.tokens.empty();
  if (out.done) buffers_.erase(it);
  return out;
}

bool Server::drain(double timeout_s) {
  std::unique_lock<std::mutex> lk(mu_);
  draining_ = true;
  const bool done = news_.wait_for(lk, std::chrono::duration<double>(timeout_s),
                                   [&] { return leader_ ? live_ == 0 : followed_; });
  if (done && !leader_ && !failed_.empty()) fail(DT_ERR_COMM, "server: following world rank 0 failed: " + failed_);
  return done;
}

nlohmann::json Server::stats_json() {
  std::lock_guard<std::mutex> lk(engine_mu_);
  nlohmann::json j = engine_->stats_json();
  std::lock_guard<std::mutex> lk2(mu_);
  j["draining"] = draining_;
  if (!failed_.empty()) j["failed"] = failed_;
  return j;
}

std::string Server::prometheus() {
  std::lock_guard<std::mutex> lk(engine_mu_);
  return engine_->prometheus();
}

void Server::deliver(const std::vector<Event>& events) {
  for (const Event& e : events) {
    Callback cb;
    {
      std::lock_guard<std::mutex> lk(mu_);
      // Only a request still registered counts: an end is delivered once.
      auto it = callbacks_.find(e.id);
      if (it != callbacks_.end()) {
        cb = it->second;
        if (e.done) {
          callbacks_.erase(it);
          --live_;
        }
      } else if (auto b = buffers_.find(e.id); b != buffers_.end() && !b->second.ended) {
        if (e.token >= 0) {
          b->second.p.tokens.push_back(e.token);
          b->second.p.logprobs.push_back(e.logprobs);
        }
        b->second.p.state = e.state;
        if (e.done) {
          b->second.ended = true;
          b->second.p.reason = e.reason;
          --live_;
        }
      }
    }
    if (cb) cb(e);
  }
  news_.notify_all();
}

void Server::loop() {
  using LoopClock = std::chrono::steady_clock;  // (engine.cc, beside it in a unity build, has its own Clock)
  // A multi-process mesh's followers wait in a collective for each plan: the leader sends
  // one at least every second (a step, or an idle tick), whatever wakes it.
  LoopClock::time_point last_sent = LoopClock::now();
  for (;;) {
    std::deque<Pending> adds;
    std::vector<int64_t> cancels;
    bool stop;
    std::string failed;
    {
      std::unique_lock<std::mutex> lk(mu_);
      wake_.wait_until(lk, last_sent + std::chrono::seconds(1),
                       [&] { return stopping_ || !inbox_.empty() || !cancels_.empty() || busy_; });
      adds.swap(inbox_);
      cancels.swap(cancels_);
      stop = stopping_;
      failed = failed_;
    }
    std::vector<Event> ev;
    bool busy = false;
    if (!failed.empty()) {  // the engine is not used again: what arrives ends at once
      for (const Pending& p : adds) ev.push_back({p.id, -1, true, SeqState::Aborted, "error: " + failed});
      deliver(ev);
      if (stop) return;
      continue;
    }
    {
      std::lock_guard<std::mutex> lk(engine_mu_);
      try {
        for (Pending& p : adds) engine_->add(p.id, p.prompt, p.params, ev);
        for (int64_t id : cancels) engine_->abort(id, ev);
        if (stop) {  // everything still in flight ends now; the followers return
          for (int64_t id : engine_->live_ids()) engine_->abort(id, ev);
          engine_->runner().stop();
        } else if (!engine_->idle()) {
          engine_->step(ev);
          last_sent = LoopClock::now();
        } else if (LoopClock::now() - last_sent >= std::chrono::seconds(1)) {
          engine_->runner().idle_tick();
          last_sent = LoopClock::now();
        }
      } catch (const std::exception& e) {
        // A failed step (a peer rank gone, a device error) ends every request: the engine's
        // state is no longer trusted, so it is never used again (see above), and later
        // submits are refused with this message.
        {
          std::lock_guard<std::mutex> lk2(mu_);
          failed_ = e.what();
        }
        for (int64_t id : engine_->live_ids()) ev.push_back({id, -1, true, SeqState::Aborted, std::string("error: ") + e.what()});
        engine_->forget_all();
      }
      busy = !engine_->idle();
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      busy_ = busy;
    }
    deliver(ev);
    if (stop) return;
  }
}

}  // namespace dt::serve
