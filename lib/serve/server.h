// A serving engine on its own thread, for hosts that embed a server (the C API's
// dt_server, the HTTP front end of `dtrain serve`): requests are submitted and cancelled
// from any thread; the loop thread adds them to the engine between steps, runs steps while
// there is work, and sleeps when there is none. Each request's events reach its callback
// (on the loop thread) or wait in a buffer for poll().
//
// Thread safety: every public call may be made from any thread, concurrently. Callbacks
// run on the loop thread and must not block for long (they hold up every request).
//
// Across processes (mpirun), only world rank 0's server takes requests; on the others the
// thread runs the steps rank 0 sends (ModelRunner::follow) until rank 0's server is
// destroyed, drain() waits for that, and submit() is UNAVAILABLE.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "serve/engine.h"

namespace dt::serve {

class Server {
 public:
  using Callback = std::function<void(const Event&)>;
  explicit Server(std::unique_ptr<ServingEngine> engine);
  // Aborts what is still in flight (each callback gets its end) and joins the loop.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Checks the request (INVALID_ARGUMENT naming the field) and queues it; returns its id.
  // cb null: its events are kept for poll(). UNAVAILABLE while draining or after
  // the engine failed (the message says which).
  int64_t submit(const std::vector<int32_t>& prompt, const SamplingParams& p, Callback cb);
  // Aborts a live request (its end event says "abort"). False if the id is unknown or ended.
  bool cancel(int64_t id);

  struct Polled {
    std::vector<int32_t> tokens;  // new since the last poll
    // Beside tokens, one each: their log-probabilities (null unless the request asked).
    std::vector<std::shared_ptr<const engine::TokenLogprobs>> logprobs;
    SeqState state = SeqState::Waiting;
    std::string reason;
    bool done = false;  // the request ended and everything was taken: the id is forgotten
  };
  // Waits up to timeout_s for news of a polled request, then takes up to max_tokens of its
  // new tokens. NOT_FOUND for an id that is unknown, already fully polled, or has a callback.
  Polled poll(int64_t id, int64_t max_tokens, double timeout_s);
  // The "logprobs" a polled request was submitted with (-1: none). NOT_FOUND as poll().
  int32_t logprobs_of(int64_t id);

  // Stops accepting requests and waits until those in flight end (or timeout_s passes:
  // false). The server stays usable for stats and polls.
  bool drain(double timeout_s);

  nlohmann::json stats_json();
  std::string prometheus();
  const nn::GPTConfig& config() const { return engine_->runner().config(); }
  const EngineConfig& engine_config() const { return engine_->config(); }

 private:
  struct Pending {
    int64_t id;
    std::vector<int32_t> prompt;
    SamplingParams params;
  };
  struct Buffer {
    Polled p;
    bool ended = false;
    int32_t logprobs = -1;  // the request's SamplingParams::logprobs
  };
  void loop();
  void follow();  // a follower process's thread (ModelRunner::follow)
  void deliver(const std::vector<Event>& events);

  std::unique_ptr<ServingEngine> engine_;
  const bool leader_;
  std::mutex engine_mu_;  // the engine: the loop's steps, stats readers

  std::mutex mu_;  // everything below
  std::condition_variable wake_, news_;
  std::deque<Pending> inbox_;
  std::vector<int64_t> cancels_;
  std::map<int64_t, Callback> callbacks_;
  std::map<int64_t, Buffer> buffers_;
  int64_t next_id_ = 1, live_ = 0;  // live_: submitted and not yet ended
  bool busy_ = false, stopping_ = false, draining_ = false, followed_ = false;
  std::string failed_;
  std::thread thread_;
};

}  // namespace dt::serve
