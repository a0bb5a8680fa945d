// Shared state of an in-process ("local") world: N rank threads of one process that
// exchange through shared memory. A Group is one communicator's members (a mesh axis);
// every wait in the backend goes through Group::wait_for, which spins briefly, then
// blocks, and gives up at the deadline, on abort, or when a missing rank has left.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "comm/communicator.h"
#include "core/error.h"

namespace dt::comm::local {

struct WorldOptions {
  double timeout_s = 300.0;  // every blocking wait gives up after this
  bool check_args = true;    // ranks compare kind, dtype, count and root before moving data
};

class World {
 public:
  World(int size, WorldOptions options);
  int size() const { return size_; }
  const WorldOptions& options() const { return options_; }

  // The first failure puts the world in an error state that every later call reports.
  void fail(dt_status code, const std::string& message);
  void abort(const std::string& reason) { fail(DT_ERR_ABORTED, "aborted: " + reason); }
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  [[noreturn]] void throw_failure() const;
  void check_healthy() const {
    if (failed()) throw_failure();
  }
  // A rank's host work returned: ranks waiting for it give up at once.
  void set_departed(int rank, bool departed);
  bool departed(int rank) const { return departed_[rank].load(std::memory_order_acquire); }

  // Wakes every blocked waiter (state they wait on has changed).
  void notify_all();
  std::mutex& mutex() { return mu_; }
  std::condition_variable& cv() { return cv_; }

 private:
  int size_;
  WorldOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> failed_{false};
  dt_status failure_code_ = DT_OK;
  std::string failure_;
  std::unique_ptr<std::atomic<bool>[]> departed_;
};

// What each member publishes for one collective: the arguments the others read.
struct Slot {
  CollKind kind = CollKind::Barrier;
  DType dtype = DType::F32;
  int64_t count = 0;
  int root = 0;
  ReduceOp op = ReduceOp::Sum;
  const void* send = nullptr;
  void* recv = nullptr;
  const int64_t* send_counts = nullptr;
  const int64_t* recv_counts = nullptr;
};

// A message posted by a sender and waiting for its receiver. It holds a copy of the
// sender's buffer (eager, like MPI's buffered sends): a send completes at once, so a
// send_async followed by a recv on the same communicator (whose operations run in issue
// order) cannot deadlock a ring, and receives may take tags in any order.
struct Message {
  std::vector<char> data;
  int64_t count = 0;
  DType dtype = DType::F32;
};

class Group {
 public:
  Group(std::shared_ptr<World> world, std::string axis, std::vector<int> members);
  int size() const { return static_cast<int>(members_.size()); }
  const std::string& axis() const { return axis_; }
  int global_rank(int member) const { return members_[member]; }
  World& world() { return *world_; }
  Slot& slot(int member) { return slots_[member]; }

  // All members arrive before any leaves. `what` names the collective in errors.
  // barrier() opens a collective (before any member touches a peer's memory): on a
  // failure a waiter takes its arrival back and leaves, so the generation can never
  // complete with it counted and no peer goes on to use its buffers.
  // fence() is every later barrier of a collective, where peers may still be reading or
  // writing this member's buffers: it waits for all members even when the world has
  // failed (they are in a phase that never blocks), and gives up only at the deadline.
  void barrier(int me, const char* what) { meet(me, what, false); }
  void fence(int me, const char* what) { meet(me, what, true); }
  // Waits until done() holds, spinning briefly and then blocking. On the deadline throws
  // TIMEOUT naming `what`, the axis and missing(); on abort or another rank's failure
  // (unless `ignore_failure`) rethrows the world's error; if a rank in missing() has
  // departed, fails with COMM. Before giving up it calls leave(), if given: false means
  // the wait has completed after all, and it goes on until done().
  // `me` is the waiting member: messages name its sequence number and each missing rank's.
  void wait_for(int me, const std::function<bool()>& done, const char* what,
                const std::function<std::vector<int>()>& missing, bool ignore_failure = false,
                const std::function<bool()>& leave = nullptr);
  // Member `me` has started the call numbered `seq` on this group (Communicator's count).
  void enter(int me, int64_t seq) { seq_[me].store(seq, std::memory_order_release); }
  // With check_args: every member's slot agrees with member 0's (kind, dtype, count, root,
  // op); throws COMM naming the first member that differs. Call after a barrier.
  void check_slots(int me, const char* what);

  // Point-to-point mailboxes, keyed by (sender, receiver, tag), first in first out.
  std::mutex& mailbox_mutex() { return mailbox_mu_; }
  std::deque<std::shared_ptr<Message>>& mailbox(int from, int to, int tag) { return mailboxes_[{from, to, tag}]; }

 private:
  std::shared_ptr<World> world_;
  std::string axis_;
  std::vector<int> members_;
  std::vector<Slot> slots_;
  void meet(int me, const char* what, bool fence);
  // The barrier: generation (high 32 bits) and members arrived in it (low 32), in one word
  // so that an arrival can be taken back atomically while the generation is incomplete.
  std::atomic<uint64_t> state_{0};
  std::unique_ptr<std::atomic<uint64_t>[]> arrival_;  // per member: last generation it reached
  std::unique_ptr<std::atomic<int64_t>[]> seq_;        // per member: the call it entered last
  // "all_reduce on axis dp (seq 5 on rank 0)"
  std::string where(int me, const char* what) const;
  // "rank 1 at seq 4, rank 2 at seq 4": how far each missing member got.
  std::string progress_of(const std::vector<int>& members) const;
  std::mutex mailbox_mu_;
  std::map<std::tuple<int, int, int>, std::deque<std::shared_ptr<Message>>> mailboxes_;
};

std::string rank_list(const std::vector<int>& ranks);

}  // namespace dt::comm::local
