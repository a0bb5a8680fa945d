#include "serve/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace dt::serve {

const char* seq_state_name(SeqState s) {
  switch (s) {
    case SeqState::Waiting: return "waiting";
    case SeqState::Running: return "running";
    case SeqState::Preempted: return "preempted";
    case SeqState::Finished: return "finished";
    case SeqState::Aborted: return "aborted";
    case SeqState::Rejected: return "rejected";
  }
  return "unknown";
}

void SchedulerConfig::check() const {
  DT_CHECK(max_num_seqs >= 1 && max_num_seqs <= 4096,
           "max_num_seqs = " + std::to_string(max_num_seqs) + "; accepted: [1, 4096]");
  DT_CHECK(max_batched_tokens >= 1 && max_batched_tokens <= (1 << 20),
           "max_batched_tokens = " + std::to_string(max_batched_tokens) + "; accepted: [1, 2^20]");
  DT_CHECK(max_model_len >= 1, "max_model_len = " + std::to_string(max_model_len) + "; accepted: >= 1");
}

Scheduler::Scheduler(BlockPool& pool, const SchedulerConfig& cfg) : pool_(pool), cfg_(cfg) { cfg_.check(); }

const SchedulerStats& Scheduler::stats() const {
  stats_.running = static_cast<int64_t>(running_.size());
  stats_.waiting = static_cast<int64_t>(waiting_.size());
  stats_.preempted_waiting = std::count_if(waiting_.begin(), waiting_.end(),
                                           [](const Sequence* s) { return s->state == SeqState::Preempted; });
  return stats_;
}

int64_t Scheduler::outstanding_tokens() const {
  int64_t n = 0;
  for (const auto& [id, s] : seqs_)
    n += s->params.max_tokens - s->output_len() + (static_cast<int64_t>(s->tokens.size()) - s->computed);
  return n;
}

std::vector<const Sequence*> Scheduler::live() const {
  std::vector<const Sequence*> v;
  for (const auto& [id, s] : seqs_) v.push_back(s.get());
  return v;
}

std::unique_ptr<Sequence> Scheduler::add(std::unique_ptr<Sequence> seq) {
  DT_CHECK(seq && !seq->tokens.empty() && seq->prompt_len == static_cast<int64_t>(seq->tokens.size()),
           "scheduler: a request needs a non-empty prompt and no output yet");
  DT_CHECK(!seqs_.count(seq->id), "scheduler: request id " + std::to_string(seq->id) + " is already live");
  const int64_t need = seq->prompt_len + seq->params.max_tokens;
  const int64_t blocks = (need + pool_.block_size() - 1) / pool_.block_size();
  std::string why;
  if (need > cfg_.max_model_len)
    why = "prompt of " + std::to_string(seq->prompt_len) + " tokens + max_tokens " +
          std::to_string(seq->params.max_tokens) + " exceeds the context of " + std::to_string(cfg_.max_model_len);
  else if (blocks > pool_.num_blocks())
    why = "needs " + std::to_string(blocks) + " KV blocks, the whole cache has " + std::to_string(pool_.num_blocks());
  if (!why.empty()) {
    seq->state = SeqState::Rejected;
    seq->reason = why;
    ++stats_.rejected;
    return seq;
  }
  seq->state = SeqState::Waiting;
  stats_.prompt_tokens += seq->prompt_len;
  waiting_.push_back(seq.get());
  seqs_[seq->id] = std::move(seq);
  return nullptr;
}

void Scheduler::release_blocks(Sequence& s) {
  // In reverse, so that a sequence's last blocks (the least shareable) are evicted first.
  for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) pool_.release(*it);
  s.blocks.clear();
  s.computed = 0;
  s.published = 0;
  s.last_hash = 0;
}

std::unique_ptr<Sequence> Scheduler::retire(int64_t id, SeqState state, const std::string& reason) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return nullptr;
  std::unique_ptr<Sequence> s = std::move(it->second);
  seqs_.erase(it);
  running_.erase(std::remove(running_.begin(), running_.end(), s.get()), running_.end());
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), s.get()), waiting_.end());
  release_blocks(*s);
  s->state = state;
  s->reason = reason;
  (state == SeqState::Aborted ? stats_.aborted : stats_.finished) += 1;
  return s;
}

std::unique_ptr<Sequence> Scheduler::abort(int64_t id) { return retire(id, SeqState::Aborted, "abort"); }

bool Scheduler::ensure_blocks(Sequence& s, int64_t positions) {
  const int64_t want = (positions + pool_.block_size() - 1) / pool_.block_size();
  const int64_t need = want - static_cast<int64_t>(s.blocks.size());
  if (need <= 0) return true;
  if (need > pool_.available()) return false;
  for (int64_t i = 0; i < need; ++i) s.blocks.push_back(pool_.allocate());
  return true;
}

void Scheduler::preempt(Sequence& s) {
  release_blocks(s);
  s.state = SeqState::Preempted;
  ++s.preemptions;
  ++stats_.preemptions;
  running_.erase(std::remove(running_.begin(), running_.end(), &s), running_.end());
  waiting_.push_front(&s);
}

void Scheduler::admit_prefix(Sequence& s) {
  if (!cfg_.prefix_caching || s.computed > 0) return;
  const int64_t bs = pool_.block_size();
  const int64_t most = (static_cast<int64_t>(s.tokens.size()) - 1) / bs;  // the last token is always computed
  for (int64_t j = 0; j < most; ++j) {
    const int32_t* t = s.tokens.data() + j * bs;
    const uint64_t h = BlockPool::chain_hash(s.last_hash, t, bs);
    const int32_t b = pool_.lookup(h, s.last_hash, t);
    if (b < 0) break;
    s.blocks.push_back(b);
    s.last_hash = h;
    s.published = j + 1;
    s.computed = (j + 1) * bs;
  }
  s.prefix_hit_tokens += s.computed;
  stats_.prefix_hit_tokens += s.computed;
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  int64_t budget = cfg_.max_batched_tokens;
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence* s = running_[i];
    const int64_t n = std::min(static_cast<int64_t>(s->tokens.size()) - s->computed, budget);
    bool ok = true;
    while (!ensure_blocks(*s, s->computed + n)) {  // preempt the newest until s fits
      Sequence* victim = running_.back();
      preempt(*victim);
      ++plan.preempted;
      if (victim == s) {
        ok = false;
        break;
      }
    }
    if (!ok) break;
    plan.chunks.push_back({s, s->computed, n, s->computed + n == static_cast<int64_t>(s->tokens.size())});
    budget -= n;
  }
  const bool admit = !cfg_.static_batching || running_.empty();
  while (admit && plan.preempted == 0 && budget > 0 && !waiting_.empty() &&
         static_cast<int64_t>(running_.size()) < cfg_.max_num_seqs) {
    Sequence* s = waiting_.front();
    admit_prefix(*s);
    const int64_t n = std::min(static_cast<int64_t>(s->tokens.size()) - s->computed, budget);
    if (!ensure_blocks(*s, s->computed + n)) {
      s->prefix_hit_tokens -= s->computed;  // counted when it is admitted
      stats_.prefix_hit_tokens -= s->computed;
      release_blocks(*s);  // the prefix blocks it took go back (still cached)
      break;
    }
    waiting_.pop_front();
    s->state = SeqState::Running;
    running_.push_back(s);
    plan.chunks.push_back({s, s->computed, n, s->computed + n == static_cast<int64_t>(s->tokens.size())});
    budget -= n;
  }
  plan.tokens = cfg_.max_batched_tokens - budget;
  if (!plan.empty()) ++stats_.steps;
  return plan;
}

std::vector<std::unique_ptr<Sequence>> Scheduler::commit(const StepPlan& plan, const std::vector<int32_t>& sampled) {
  std::vector<std::unique_ptr<Sequence>> ended;
  size_t next = 0;
  const int64_t bs = pool_.block_size();
  for (const ScheduledChunk& c : plan.chunks) {
    Sequence& s = *c.seq;
    s.computed = c.begin + c.count;
    if (cfg_.prefix_caching)
      while ((s.published + 1) * bs <= s.computed) {  // newly full blocks become findable
        const int32_t* t = s.tokens.data() + s.published * bs;
        const uint64_t parent = s.last_hash;
        s.last_hash = BlockPool::chain_hash(parent, t, bs);
        pool_.publish(s.blocks[static_cast<size_t>(s.published)], s.last_hash, parent, t);
        ++s.published;
      }
    if (!c.sample) continue;
    DT_CHECK(next < sampled.size(), "scheduler: commit got fewer sampled tokens than the plan samples");
    const int32_t t = sampled[next++];
    s.tokens.push_back(t);
    s.last_token = Sequence::Clock::now();
    if (s.output_len() == 1) s.first_token = s.last_token;
    const auto& stop = s.params.stop_tokens;
    if (std::find(stop.begin(), stop.end(), t) != stop.end())
      ended.push_back(retire(s.id, SeqState::Finished, "stop"));
    else if (s.output_len() >= s.params.max_tokens)
      ended.push_back(retire(s.id, SeqState::Finished, "length"));
  }
  return ended;
}

std::string Scheduler::check() const {
  std::string e = pool_.check();
  if (!e.empty()) return e;
  std::vector<int> held(static_cast<size_t>(pool_.num_blocks()), 0);
  const int64_t bs = pool_.block_size();
  for (const auto& [id, s] : seqs_) {
    if (terminal(s->state)) return "sequence " + std::to_string(id) + " is " + seq_state_name(s->state) + " but live";
    for (int32_t b : s->blocks) {
      if (b < 0 || b >= pool_.num_blocks()) return "sequence " + std::to_string(id) + " holds block " + std::to_string(b);
      ++held[static_cast<size_t>(b)];
    }
    if (s->computed > static_cast<int64_t>(s->blocks.size()) * bs)
      return "sequence " + std::to_string(id) + " computed " + std::to_string(s->computed) + " positions in " +
             std::to_string(s->blocks.size()) + " blocks";
    const bool queued = s->state == SeqState::Waiting || s->state == SeqState::Preempted;
    if (queued && !s->blocks.empty()) return "queued sequence " + std::to_string(id) + " holds blocks";
  }
  for (int64_t b = 0; b < pool_.num_blocks(); ++b)
    if (held[static_cast<size_t>(b)] != pool_.refcount(static_cast<int32_t>(b)))
      return "block " + std::to_string(b) + " has refcount " + std::to_string(pool_.refcount(static_cast<int32_t>(b))) +
             " but " + std::to_string(held[static_cast<size_t>(b)]) + " tables hold it";
  if (running_.size() + waiting_.size() != seqs_.size()) return "a live sequence is in no queue, or in two";
  return "";
}

}  // namespace dt::serve
