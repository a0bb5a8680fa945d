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
      arrival_(new std::atomic<uint64_t>[members_.size()]) {
  for (size_t i = 0; i < members_.size(); ++i) arrival_[i] = 0;
}

void Group::wait_for(const std::function<bool()>& done, const char* what,
                     const std::function<std::vector<int>()>& missing) {
  // Spin a few microseconds (a peer on another core answers fast), then yield, then block:
  // with more ranks than cores, spinning would steal the core the peer needs.
  for (int i = 0; i < 2000; ++i) {
    if (done()) return;
    _mm_pause();
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
    if (w.failed()) {
      lk.unlock();
      w.throw_failure();
    }
    std::vector<int> gone;
    for (int m : missing())
      if (w.departed(members_[m])) gone.push_back(members_[m]);
    if (!gone.empty()) {
      std::string msg = std::string(what) + " on axis " + axis_ + ": rank(s) " + rank_list(gone) +
                        " returned without joining it";
      lk.unlock();
      w.fail(DT_ERR_COMM, msg);
      w.throw_failure();
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::vector<int> lost;
      for (int m : missing()) lost.push_back(members_[m]);
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.3g", w.options().timeout_s);
      std::string msg = std::string(what) + " on axis " + axis_ + " timed out after " + secs + " s: rank(s) " +
                        rank_list(lost) + " did not arrive";
      lk.unlock();
      w.fail(DT_ERR_TIMEOUT, msg);
      w.throw_failure();
    }
    // Wake periodically too: departures and deadlines are checked here.
    w.cv().wait_until(lk, std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(50)));
  }
}

void Group::barrier(int me, const char* what) {
  world_->check_healthy();
  uint64_t gen = generation_.load(std::memory_order_acquire);
  arrival_[me].store(gen + 1, std::memory_order_release);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == size()) {
    arrived_.store(0, std::memory_order_relaxed);
    generation_.store(gen + 1, std::memory_order_release);
    world_->notify_all();
    return;
  }
  wait_for([&] { return generation_.load(std::memory_order_acquire) != gen; }, what, [&] {
    std::vector<int> m;
    for (int i = 0; i < size(); ++i)
      if (arrival_[i].load(std::memory_order_acquire) != gen + 1) m.push_back(i);
    return m;
  });
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
