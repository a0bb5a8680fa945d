#include "comm/local/world.h"

#include <immintrin.h>
#include <sched.h>

namespace dt::comm::local {

World::World(int size, WorldOptions options)
    : size_(size), options_(options), departed_(new std::atomic<bool>[size]) {
  for (int i = 0; i < size; ++i) departed_[i] = false;
}

void World::fail(dt_status code, const std::string& message) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!failed_.load(std::memory_order_relaxed)) {
      failure_code_ = code;
      failure_ = message;
      failed_.store(true, std::memory_order_release);
    }
  }
  cv_.notify_all();
}

void World::throw_failure() const {
  // failure_ is written once, before failed_ is released, and never again.
  throw Error(failure_code_, failure_);
}

void World::set_departed(int rank, bool departed) {
  departed_[rank].store(departed, std::memory_order_release);
  notify_all();
}

void World::notify_all() {
  { std::lock_guard<std::mutex> g(mu_); }
  cv_.notify_all();
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

Group::Group(std::shared_ptr<World> world, std::string axis, std::vector<int> members)
    : world_(std::move(world)), axis_(std::move(axis)), members_(std::move(members)), slots_(members_.size()),
      arrival_(new std::atomic<uint64_t>[members_.size()]), seq_(new std::atomic<int64_t>[members_.size()]) {
  for (size_t i = 0; i < members_.size(); ++i) arrival_[i] = 0, seq_[i] = 0;
}

std::string Group::where(int me, const char* what) const {
  return std::string(what) + " on axis " + axis_ + " (seq " + std::to_string(seq_[me].load()) + " on rank " +
         std::to_string(members_[me]) + ")";
}

std::string Group::progress_of(const std::vector<int>& members) const {
  std::string s;
  for (int m : members)
    s += std::string(s.empty() ? "" : ", ") + "rank " + std::to_string(members_[m]) + " last entered seq " +
         std::to_string(seq_[m].load());
  return s;
}

void Group::wait_for(int me, const std::function<bool()>& done, const char* what,
                     const std::function<std::vector<int>()>& missing, bool ignore_failure,
                     const std::function<bool()>& leave) {
  // Spin a few microseconds (a peer on another core answers fast), then yield, then block:
  // with more ranks than cores, spinning would steal the core the peer needs. The spin
  // yields now and then too: the scheduler often leaves two rank threads on one core while
  // another process is busy, and then the peer can only run when this thread steps aside.
  for (int i = 0; i < 2000; ++i) {
    if (done()) return;
    if (i % 64 == 63) sched_yield();
    else _mm_pause();
  }
  for (int i = 0; i < 20; ++i) {
    if (done()) return;
    sched_yield();
  }
  World& w = *world_;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                        std::chrono::duration<double>(w.options().timeout_s));
  std::unique_lock<std::mutex> lk(w.mutex());
  for (;;) {
    if (done()) return;
    // Why this wait gives up, if it does: the world's error, or one of its own.
    bool give_up = false;
    dt_status code = DT_OK;
    std::string msg;
    if (!ignore_failure && w.failed()) {
      give_up = true;
    } else {
      // Departures are read first, then done() and missing() again: a member can do its
      // part (arrive, send), see the wait complete and depart after the done() above, and
      // would then look like one that left without doing it. A departure read here carries
      // everything its member did before it, so the second look sees that part.
      std::vector<char> left(members_.size());
      bool any_left = false;
      for (size_t i = 0; i < members_.size(); ++i) any_left |= (left[i] = w.departed(members_[i])) != 0;
      if (any_left && done()) return;
      std::vector<int> gone, gone_members;
      if (any_left)
        for (int m : missing())
          if (left[m]) gone.push_back(members_[m]), gone_members.push_back(m);
      if (!gone.empty()) {
        give_up = true;
        code = DT_ERR_COMM;
        msg = where(me, what) + ": rank(s) " + rank_list(gone) + " returned without joining it (" +
              progress_of(gone_members) + ")";
      } else if (std::chrono::steady_clock::now() >= deadline) {
        std::vector<int> lost, lost_members = missing();
        for (int m : lost_members) lost.push_back(members_[m]);
        char secs[32];
        std::snprintf(secs, sizeof secs, "%.3g", w.options().timeout_s);
        give_up = true;
        code = DT_ERR_TIMEOUT;
        msg = where(me, what) + " timed out after " + secs + " s: rank(s) " + rank_list(lost) + " did not arrive (" +
              progress_of(lost_members) + ")";
      }
    }
    if (give_up) {
      // Fail the world before leave() takes this member's arrival back: a peer that then
      // sees it missing also sees the failure, and never reports it as not arrived.
      lk.unlock();
      if (code != DT_OK) w.fail(code, msg);
      if (leave && !leave()) {  // completed meanwhile: wait for done() to show it
        sched_yield();
        lk.lock();
        continue;
      }
      w.throw_failure();
    }
    // Wake periodically too: departures and deadlines are checked here.
    w.cv().wait_until(lk, std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(50)));
  }
}

void Group::meet(int me, const char* what, bool fence) {
  constexpr uint64_t kCount = 0xffffffffull;
  if (!fence) world_->check_healthy();
  const uint64_t gen = state_.load(std::memory_order_acquire) >> 32;  // cannot advance without us
  arrival_[me].store(gen + 1, std::memory_order_release);
  if ((state_.fetch_add(1, std::memory_order_acq_rel) & kCount) + 1 == static_cast<uint64_t>(size())) {
    state_.store((gen + 1) << 32, std::memory_order_release);  // next generation, nobody arrived
    world_->notify_all();
    return;
  }
  auto withdraw = [&] {
    uint64_t cur = state_.load(std::memory_order_acquire);
    while ((cur >> 32) == gen && (cur & kCount) < static_cast<uint64_t>(size()))
      if (state_.compare_exchange_weak(cur, cur - 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        arrival_[me].store(gen, std::memory_order_release);
        return true;
      }
    return false;  // the last member has arrived: the barrier is complete
  };
  wait_for(me, [&] { return (state_.load(std::memory_order_acquire) >> 32) != gen; }, what,
           [&] {
             std::vector<int> m;
             for (int i = 0; i < size(); ++i)
               if (arrival_[i].load(std::memory_order_acquire) != gen + 1) m.push_back(i);
             return m;
           },
           fence, fence ? std::function<bool()>() : std::function<bool()>(withdraw));
}

void Group::check_slots(int me, const char* what) {
  if (!world_->options().check_args) return;
  const Slot& a = slots_[0];
  for (int i = 1; i < size(); ++i) {
    const Slot& b = slots_[i];
    std::string diff;
    if (b.kind != a.kind) diff = std::string("op ") + coll_name(b.kind) + " vs " + coll_name(a.kind);
    else if (b.dtype != a.dtype) diff = std::string("dtype ") + dtype_name(b.dtype) + " vs " + dtype_name(a.dtype);
    else if (b.count != a.count) diff = "count " + std::to_string(b.count) + " vs " + std::to_string(a.count);
    else if (b.root != a.root) diff = "root " + std::to_string(b.root) + " vs " + std::to_string(a.root);
    else if (b.op != a.op) diff = std::string("reduce op ") + kernels::reduce_op_name(b.op) + " vs " +
                                  kernels::reduce_op_name(a.op);
    if (!diff.empty()) {
      std::string msg = std::string(what) + " on axis " + axis_ + ": rank " + std::to_string(members_[i]) +
                        " called with " + diff + " of rank " + std::to_string(members_[0]) + " (mismatched collectives)";
      world_->fail(DT_ERR_COMM, msg);
      world_->throw_failure();
    }
  }
  (void)me;
}

}  // namespace dt::comm::local
