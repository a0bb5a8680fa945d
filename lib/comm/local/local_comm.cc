#include "comm/local/local_comm.h"

#include <chrono>
#include <exception>

#include "comm/local/algo_util.h"
#include "core/thread_pool.h"

namespace dt::comm::local {
namespace {

// Rethrows a copy of the operation's error rather than the one object that every waiter
// would share: a library error's copy owns its message, so a rank thread reading it never
// races with the progress thread releasing the original (the exception's reference count
// lives in the C++ runtime, which thread sanitizers do not see).
[[noreturn]] void rethrow_copy(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    throw Error(e.code(), e.what());
  }
}

class LocalWork : public Work {
 public:
  void finish(std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> g(mu_);
      error_ = error;
      done_ = true;
    }
    cv_.notify_all();
  }
  bool test() override {
    std::lock_guard<std::mutex> g(mu_);
    if (done_ && error_) rethrow_copy(error_);
    return done_;
  }
  void wait() override {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return done_; });  // the operation itself has a deadline
    if (error_) rethrow_copy(error_);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

}  // namespace

LocalComm::LocalComm(std::shared_ptr<Group> group, int member) : group_(std::move(group)), me_(member) {}

LocalComm::~LocalComm() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (progress_.joinable()) progress_.join();
}

void LocalComm::execute(const CollRequest& r) {
  ScopedSerialKernels serial;  // this rank is one of the threads sharing the cores
  auto t0 = std::chrono::steady_clock::now();
  Group& g = *group_;
  g.enter(me_, r.seq);  // peers' timeout messages say how far this member got
  switch (r.kind) {
    case CollKind::AllReduce: run_all_reduce(g, me_, r.send, r.recv, r.count, r.dtype, r.op); break;
    case CollKind::AllGather: run_all_gather(g, me_, r.send, r.recv, r.count, r.dtype); break;
    case CollKind::ReduceScatter: run_reduce_scatter(g, me_, r.send, r.recv, r.count, r.dtype, r.op); break;
    case CollKind::Broadcast: run_broadcast(g, me_, r.send, r.recv, r.count, r.dtype, r.root); break;
    case CollKind::Reduce: run_reduce(g, me_, r.send, r.recv, r.count, r.dtype, r.op, r.root); break;
    case CollKind::AllToAll:
      run_all_to_all(g, me_, r.send, r.send_counts.data(), r.recv, r.recv_counts.data(), r.dtype);
      break;
    case CollKind::Send: run_send(g, me_, r.send, r.count, r.dtype, r.root, r.tag); break;
    case CollKind::Recv: run_recv(g, me_, r.recv, r.count, r.dtype, r.root, r.tag); break;
    case CollKind::Barrier:
      // Published like every collective: a barrier met by another collective must be a
      // mismatch, not that collective's first barrier (which would then read this member's
      // stale slot). The second barrier keeps slots unchanged until all have checked them.
      if (g.world().options().check_args) {
        publish(g, me_, slot_of(CollKind::Barrier, DType::F32, 0, nullptr, nullptr), "barrier");
        g.fence(me_, "barrier");
      } else {
        g.barrier(me_, "barrier");
      }
      break;
  }
  ledger_.record(r.kind, r.bytes, r.wire_bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

WorkPtr LocalComm::issue(const CollRequest& r, bool blocking) {
  group_->world().check_healthy();
  std::unique_lock<std::mutex> lk(mu_);
  if (blocking && queue_.empty() && !busy_) {
    lk.unlock();
    execute(r);  // nothing queued ahead: run on the caller's thread, no hand-off
    return completed_work();
  }
  auto work = std::make_shared<LocalWork>();
  queue_.push_back([this, r, work] {
    try {
      execute(r);
      work->finish(nullptr);
    } catch (...) {
      work->finish(std::current_exception());
    }
  });
  if (!progress_.joinable()) progress_ = std::thread([this] { progress_loop(); });
  lk.unlock();
  cv_.notify_all();
  return work;
}

void LocalComm::progress_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop requested and nothing left
    auto task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    task();
    lk.lock();
    busy_ = false;
  }
}

}  // namespace dt::comm::local
