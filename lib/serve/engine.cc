#include "serve/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/rng.h"

namespace dt::serve {
namespace {
using Clock = std::chrono::steady_clock;
double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

void EngineConfig::check() const {
  DT_CHECK(block_size >= 1 && block_size <= 1024, "block_size = " + std::to_string(block_size) + "; accepted: [1, 1024]");
  DT_CHECK(num_blocks >= 0, "kv_blocks = " + std::to_string(num_blocks) + "; accepted: >= 1, or 0 (from kv_cache_bytes)");
  DT_CHECK(num_blocks > 0 || kv_cache_bytes >= 1,
           "kv_cache_bytes = " + std::to_string(kv_cache_bytes) + "; accepted: >= 1");
  SchedulerConfig s;
  s.max_num_seqs = max_num_seqs;
  s.max_batched_tokens = max_batched_tokens;
  s.max_model_len = 1;
  s.check();
}

ServingEngine::ServingEngine(std::unique_ptr<ModelRunner> runner, const EngineConfig& cfg)
    : runner_(std::move(runner)), cfg_(cfg) {
  cfg_.check();
  const nn::GPTConfig& m = runner_->config();
  bytes_per_block_ = runner_->bytes_per_block(cfg_.block_size);
  if (cfg_.num_blocks == 0) {
    cfg_.num_blocks = cfg_.kv_cache_bytes / bytes_per_block_;
    DT_CHECK(cfg_.num_blocks >= 1, "kv_cache_bytes = " + std::to_string(cfg_.kv_cache_bytes) +
                                       " holds no KV block; accepted: >= " + std::to_string(bytes_per_block_) +
                                       " (one block of " + std::to_string(cfg_.block_size) + " positions)");
  }
  runner_->create_caches(cfg_.num_blocks, cfg_.block_size);
  SchedulerConfig sc;
  sc.max_num_seqs = cfg_.max_num_seqs;
  sc.max_batched_tokens = cfg_.max_batched_tokens;
  sc.max_model_len = m.context;
  sc.prefix_caching = cfg_.prefix_caching;
  sc.static_batching = cfg_.static_batching;
  for (int r = 0; r < runner_->replicas(); ++r) {
    auto rep = std::make_unique<Replica>();
    rep->pool = std::make_unique<BlockPool>(cfg_.num_blocks, cfg_.block_size);
    rep->sched = std::make_unique<Scheduler>(*rep->pool, sc);
    reps_.push_back(std::move(rep));
  }
}

void ServingEngine::check_request(const std::vector<int32_t>& prompt, const SamplingParams& p) const {
  const int64_t V = runner_->config().vocab_size;
  DT_CHECK(!prompt.empty(), "prompt: empty; accepted: at least one token");
  for (int32_t t : prompt)
    DT_CHECK(t >= 0 && t < V, "prompt: token id " + std::to_string(t) + " is outside [0, vocab_size = " +
                                  std::to_string(V) + ")");
  const int64_t context = runner_->config().context;
  DT_CHECK(p.max_tokens >= 1 && p.max_tokens <= context,
           "max_tokens = " + std::to_string(p.max_tokens) + "; accepted: [1, context = " + std::to_string(context) + "]");
  // A prompt longer than the context is not a bad argument but a request that can never
  // run: add() rejects it with the reason. (Its length is bounded, so the sum cannot overflow.)
  DT_CHECK(prompt.size() <= (size_t{1} << 30), "prompt: " + std::to_string(prompt.size()) + " tokens; accepted: up to 2^30");
  p.check(V);
  p.adjust.check(V);
  DT_CHECK(p.logprobs >= -1 && p.logprobs <= engine::kMaxLogprobs,
           "logprobs = " + std::to_string(p.logprobs) + "; accepted: [0, " + std::to_string(engine::kMaxLogprobs) +
               "] alternatives per token, or -1: none");
}

void ServingEngine::add(int64_t id, const std::vector<int32_t>& prompt, const SamplingParams& p,
                        std::vector<Event>& events) {
  check_request(prompt, p);
  DT_CHECK(!where_.count(id), "request id " + std::to_string(id) + " is already live");
  int best = 0;  // the router: fewest outstanding tokens, lowest index on ties
  for (int r = 1; r < replicas(); ++r)
    if (reps_[r]->sched->outstanding_tokens() < reps_[best]->sched->outstanding_tokens()) best = r;
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->tokens = prompt;
  s->prompt_len = static_cast<int64_t>(prompt.size());
  s->params = p;
  std::unique_ptr<Sequence> rejected = reps_[best]->sched->add(std::move(s));
  if (rejected) {
    ++rejected_;
    events.push_back({id, -1, true, SeqState::Rejected, rejected->reason});
    return;
  }
  prompt_tokens_ += static_cast<int64_t>(prompt.size());
  where_[id] = best;
}

void ServingEngine::ended(std::unique_ptr<Sequence> s, std::vector<Event>& events, bool with_token) {
  where_.erase(s->id);
  (s->state == SeqState::Aborted ? aborted_ : finished_) += 1;
  events.push_back({s->id, with_token ? s->tokens.back() : -1, true, s->state, s->reason});
}

bool ServingEngine::abort(int64_t id, std::vector<Event>& events) {
  auto it = where_.find(id);
  if (it == where_.end()) return false;
  std::unique_ptr<Sequence> s = reps_[static_cast<size_t>(it->second)]->sched->abort(id);
  if (!s) return false;
  ended(std::move(s), events, false);
  return true;
}

bool ServingEngine::idle() const { return where_.empty(); }
int64_t ServingEngine::active() const { return static_cast<int64_t>(where_.size()); }
std::vector<int64_t> ServingEngine::live_ids() const {
  std::vector<int64_t> v;
  for (const auto& [id, r] : where_) v.push_back(id);
  return v;
}

int32_t ServingEngine::draw(const Sequence& s, float* row, int64_t V,
                            std::shared_ptr<const engine::TokenLogprobs>* lp) const {
  const bool want = s.params.logprobs >= 0, adjust = s.params.adjust.active();
  // Log-probabilities describe the model, so they come from the row before any change:
  // a copy of it when the row is about to change.
  std::vector<float> raw_copy;
  if (want && adjust) raw_copy.assign(row, row + V);
  if (adjust) s.params.adjust.apply(row, V, s.tokens, s.prompt_len);
  // Keyed by the token's index in the output: generate()'s draw for a lone prompt.
  const float u = CounterRng(s.params.seed, "sample").uniform(static_cast<uint64_t>(s.output_len()));
  const int32_t t = engine::sample_token(row, V, s.params, u);
  if (want)
    *lp = std::make_shared<const engine::TokenLogprobs>(
        engine::token_logprobs(adjust ? raw_copy.data() : row, V, t, s.params.logprobs));
  return t;
}

void ServingEngine::step(std::vector<Event>& events) {
  const auto t0 = Clock::now();
  const size_t R = reps_.size();
  std::vector<StepPlan> plans(R);
  std::vector<nn::PagedBatch> batches(R);
  bool any = false;
  for (size_t r = 0; r < R; ++r) {
    plans[r] = reps_[r]->sched->schedule();
    for (const ScheduledChunk& c : plans[r].chunks) {
      const Sequence& s = *c.seq;
      batches[r].ids.insert(batches[r].ids.end(), s.tokens.begin() + c.begin, s.tokens.begin() + c.begin + c.count);
      batches[r].seqs.push_back({c.begin, c.count, s.blocks, c.sample});
    }
    any = any || !plans[r].empty();
  }
  if (!any) return;
  std::vector<std::vector<float>> logits;
  runner_->run(batches, logits);
  const int64_t V = runner_->config().vocab_size;
  const auto now = Clock::now();
  for (size_t r = 0; r < R; ++r) {
    std::vector<int32_t> sampled;
    std::vector<Sequence*> who;
    std::vector<std::shared_ptr<const engine::TokenLogprobs>> lps;  // per sampled token; null: not asked
    std::vector<Clock::time_point> prev;
    size_t row = 0;
    for (const ScheduledChunk& c : plans[r].chunks) {
      if (!c.sample) continue;
      Sequence& s = *c.seq;
      DT_ASSERT((row + 1) * static_cast<size_t>(V) <= logits[r].size());
      lps.emplace_back();
      sampled.push_back(draw(s, logits[r].data() + row * static_cast<size_t>(V), V, &lps.back()));
      who.push_back(&s);
      prev.push_back(s.output_len() == 0 ? s.arrival : s.last_token);
      ++row;
    }
    for (size_t i = 0; i < who.size(); ++i) (who[i]->output_len() == 0 ? ttft_ : itl_).observe(seconds(now - prev[i]));
    std::map<int64_t, size_t> index;  // sequence id -> its place in who
    for (size_t i = 0; i < who.size(); ++i) index[who[i]->id] = i;
    std::set<int64_t> done;
    std::vector<std::unique_ptr<Sequence>> ended_now = reps_[r]->sched->commit(plans[r], sampled);
    for (const auto& s : ended_now) done.insert(s->id);
    for (size_t i = 0; i < who.size(); ++i)
      if (!done.count(who[i]->id)) {
        events.push_back({who[i]->id, sampled[i], false, SeqState::Running, ""});
        events.back().logprobs = lps[i];
      }
    for (auto& s : ended_now) {
      auto it = index.find(s->id);  // every sequence that ends in a step sampled in it
      ended(std::move(s), events, true);
      if (it != index.end()) events.back().logprobs = lps[it->second];
    }
    generated_ += static_cast<int64_t>(sampled.size());
  }
  ++steps_;
  busy_s_ += seconds(Clock::now() - t0);
}

std::string ServingEngine::check() const {
  for (size_t r = 0; r < reps_.size(); ++r) {
    const std::string e = reps_[r]->sched->check();
    if (!e.empty()) return "replica " + std::to_string(r) + ": " + e;
  }
  return "";
}

nlohmann::json ServingEngine::stats_json() const {
  int64_t waiting = 0, running = 0, preempted = 0, preemptions = 0, hit = 0, prompt = 0, peak = 0;
  BlockCounts blocks;
  nlohmann::json reps = nlohmann::json::array();
  for (const auto& rep : reps_) {
    const SchedulerStats& st = rep->sched->stats();
    const BlockCounts c = rep->pool->counts();
    waiting += st.waiting - st.preempted_waiting;
    preempted += st.preempted_waiting;
    running += st.running;
    preemptions += st.preemptions;
    hit += st.prefix_hit_tokens;
    prompt += st.prompt_tokens;
    blocks.used += c.used;
    peak += rep->pool->peak_used();
    blocks.cached += c.cached;
    blocks.free += c.free;
    reps.push_back({{"running", st.running}, {"waiting", st.waiting}, {"outstanding_tokens", rep->sched->outstanding_tokens()},
                    {"kv_blocks_used", c.used}, {"kv_blocks_cached", c.cached}, {"kv_blocks_free", c.free}});
  }
  const int64_t bpb = bytes_per_block_;
  return {{"layout", runner_->layout()},
          {"requests", {{"waiting", waiting}, {"running", running}, {"preempted", preempted}, {"finished", finished_},
                        {"aborted", aborted_}, {"rejected", rejected_}}},
          {"tokens", {{"prompt", prompt_tokens_}, {"generated", generated_}}},
          {"tokens_per_s", busy_s_ > 0 ? static_cast<double>(generated_) / busy_s_ : 0.0},
          {"steps", steps_},
          {"preemptions", preemptions},
          {"ttft_s", ttft_.json()},
          {"itl_s", itl_.json()},
          {"kv_cache", {{"block_size", cfg_.block_size}, {"blocks_per_replica", cfg_.num_blocks},
                        {"bytes_per_block", bpb}, {"used_blocks", blocks.used}, {"cached_blocks", blocks.cached},
                        {"free_blocks", blocks.free}, {"used_bytes", blocks.used * bpb},
                        {"cached_bytes", blocks.cached * bpb}, {"free_bytes", blocks.free * bpb},
                        {"peak_used_blocks", peak}, {"peak_used_bytes", peak * bpb},
                        {"prefix_hit_tokens", hit},
                        {"prefix_hit_rate", prompt > 0 ? static_cast<double>(hit) / static_cast<double>(prompt) : 0.0}}},
          {"replicas", reps}};
}

std::string ServingEngine::prometheus() const {
  const nlohmann::json j = stats_json();
  std::ostringstream o;
  // Requests now in a state are a gauge; those that ended, a counter (Prometheus's rate()
  // needs the type right).
  o << "# HELP dtrain_requests Requests now in each live state.\n# TYPE dtrain_requests gauge\n";
  for (const char* s : {"waiting", "running", "preempted"})
    o << "dtrain_requests{state=\"" << s << "\"} " << j["requests"][s].get<int64_t>() << "\n";
  o << "# HELP dtrain_requests_total Requests that ended, by how.\n# TYPE dtrain_requests_total counter\n";
  for (const char* s : {"finished", "aborted", "rejected"})
    o << "dtrain_requests_total{state=\"" << s << "\"} " << j["requests"][s].get<int64_t>() << "\n";
  o << "# HELP dtrain_generated_tokens_total Tokens generated.\n# TYPE dtrain_generated_tokens_total counter\n"
    << "dtrain_generated_tokens_total " << generated_ << "\n";
  o << "# HELP dtrain_prompt_tokens_total Prompt tokens accepted.\n# TYPE dtrain_prompt_tokens_total counter\n"
    << "dtrain_prompt_tokens_total " << prompt_tokens_ << "\n";
  o << "# HELP dtrain_tokens_per_second Generated tokens per second of engine steps.\n"
    << "# TYPE dtrain_tokens_per_second gauge\ndtrain_tokens_per_second " << j["tokens_per_s"].get<double>() << "\n";
  o << "# HELP dtrain_kv_blocks KV cache blocks by state.\n# TYPE dtrain_kv_blocks gauge\n";
  for (const char* s : {"used", "cached", "free"})
    o << "dtrain_kv_blocks{state=\"" << s << "\"} " << j["kv_cache"][std::string(s) + "_blocks"].get<int64_t>() << "\n";
  o << "# HELP dtrain_preemptions_total Sequences preempted (recomputed later).\n"
    << "# TYPE dtrain_preemptions_total counter\ndtrain_preemptions_total " << j["preemptions"].get<int64_t>() << "\n";
  o << "# HELP dtrain_prefix_cache_hit_tokens_total Prompt positions found in the prefix cache.\n"
    << "# TYPE dtrain_prefix_cache_hit_tokens_total counter\ndtrain_prefix_cache_hit_tokens_total "
    << j["kv_cache"]["prefix_hit_tokens"].get<int64_t>() << "\n";
  o << ttft_.prometheus("dtrain_time_to_first_token_seconds", "Seconds from arrival to the first token.");
  o << itl_.prometheus("dtrain_inter_token_latency_seconds", "Seconds between a request's consecutive tokens.");
  return o.str();
}

}  // namespace dt::serve
