// The serving engine: requests that come and go at any time, run by continuous batching
// (serve/scheduler.h) over a paged KV cache (serve/block_pool.h, nn/paged_kv.h), on one or
// more replicas (serve/model_runner.h) behind a router that sends each new request to the
// replica with the fewest outstanding tokens.
//
// The engine is single-threaded: serve/server.h drives it from its own thread and takes
// requests from any thread. Every call reports what happened as Events: each new token,
// and each request's end (finished, aborted, or rejected with the reason).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/metrics.h"
#include "serve/model_runner.h"
#include "serve/scheduler.h"

namespace dt::serve {

struct EngineConfig {
  int64_t block_size = 16;               // positions per KV block
  int64_t num_blocks = 0;                // per replica; 0: as many as kv_cache_bytes holds
  int64_t kv_cache_bytes = int64_t{64} << 20;  // per rank, when num_blocks is 0
  int64_t max_num_seqs = 16;
  int64_t max_batched_tokens = 256;
  bool prefix_caching = true;
  bool static_batching = false;  // the baseline (SchedulerConfig::static_batching)
  void check() const;  // INVALID_ARGUMENT naming the field (as dt_server_create's keys name it)
};

struct Event {
  Event() = default;
  // Not an aggregate, so the places that make one need not name logprobs.
  Event(int64_t id_, int32_t token_, bool done_, SeqState state_, std::string reason_)
      : id(id_), token(token_), done(done_), state(state_), reason(std::move(reason_)) {}
  int64_t id = 0;
  int32_t token = -1;  // a new token, or -1 for an end without one
  bool done = false;   // the request ended (with this token, if any)
  SeqState state = SeqState::Running;
  std::string reason;  // at the end: "stop", "length", "abort", or why it was rejected
  // The token's log-probabilities when its request asked for them (logprobs >= 0).
  std::shared_ptr<const engine::TokenLogprobs> logprobs;
};

class ServingEngine {
 public:
  ServingEngine(std::unique_ptr<ModelRunner> runner, const EngineConfig& cfg);

  // Checks the request (INVALID_ARGUMENT naming the field: an empty prompt, a token id
  // outside the vocabulary, max_tokens < 1, bad sampling values, penalties, logit_bias or
  // logprobs) and queues it on the
  // least loaded replica. A request that can never run (longer than the context, or than
  // the whole KV cache) ends at once: its Rejected event is appended to `events`.
  void add(int64_t id, const std::vector<int32_t>& prompt, const SamplingParams& params, std::vector<Event>& events);
  // add()'s checks alone (INVALID_ARGUMENT naming the field); safe beside a running step.
  void check_request(const std::vector<int32_t>& prompt, const SamplingParams& params) const;
  // Ends the request at once, all its blocks released (an Aborted event). False if unknown.
  bool abort(int64_t id, std::vector<Event>& events);
  // One step on every replica with work: schedule, run the model, sample, commit.
  void step(std::vector<Event>& events);
  bool idle() const;
  int64_t active() const;
  std::vector<int64_t> live_ids() const;
  // After a failed step: forgets every request (the caller ends them); the engine is then
  // not used again.
  void forget_all() { where_.clear(); }

  int replicas() const { return static_cast<int>(reps_.size()); }
  const Scheduler& scheduler(int replica) const { return *reps_.at(static_cast<size_t>(replica))->sched; }
  ModelRunner& runner() { return *runner_; }
  const EngineConfig& config() const { return cfg_; }
  int64_t kv_bytes_per_block() const { return bytes_per_block_; }
  // The accounting invariant of every replica (Scheduler::check); "" when it holds.
  std::string check() const;

  // Statistics: requests by state, tokens, TTFT and inter-token latency histograms, KV
  // blocks used / cached / free, prefix cache hits, preemptions.
  nlohmann::json stats_json() const;
  std::string prometheus() const;

 private:
  struct Replica {
    std::unique_ptr<BlockPool> pool;
    std::unique_ptr<Scheduler> sched;
  };
  void ended(std::unique_ptr<Sequence> s, std::vector<Event>& events, bool with_token);
  // The token drawn for a sequence from its raw row of V logits (changed in place by its
  // LogitsAdjust); *lp gets its log-probabilities when the request asked for them.
  int32_t draw(const Sequence& s, float* row, int64_t V, std::shared_ptr<const engine::TokenLogprobs>* lp) const;
  std::unique_ptr<ModelRunner> runner_;
  EngineConfig cfg_;
  nlohmann::json model_json_;
  int64_t bytes_per_block_ = 0;
  std::vector<std::unique_ptr<Replica>> reps_;
  std::map<int64_t, int> where_;  // live request -> replica
  Histogram ttft_{latency_buckets()}, itl_{latency_buckets()};
  int64_t generated_ = 0, prompt_tokens_ = 0, steps_ = 0, finished_ = 0, aborted_ = 0, rejected_ = 0;
  double busy_s_ = 0;  // seconds spent in steps
};

}  // namespace dt::serve
