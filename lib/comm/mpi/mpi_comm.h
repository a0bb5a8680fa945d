// A group's MPI communicator as a dt Communicator.
//
// Every operation is a chain of nonblocking MPI calls (MPI_Iallreduce's kin) polled with
// MPI_Test: an Op is a list of steps, each of which may post requests; the next step runs
// once they complete. Nothing progresses on a thread of its own: MPI moves data only while
// some rank calls MPI, so issue(), Work::test() and Work::wait() all pump the channel's
// queue. A caller that issues *_async must therefore test() or wait() its Work (results,
// Avg's division and the ledger entry land then, or at the next call on the communicator).
//
// Order: MPI matches a communicator's collectives in the order each rank posts them, so
// an Op starts only once every Op before it has posted its last step (a two-step all-reduce
// never interleaves with the next collective), which keeps every rank's posting order the
// issue order.
#pragma once
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/mpi/mpi_world.h"

namespace dt::comm::mpi {

class Channel;

struct Op {
  CollKind kind = CollKind::Barrier;
  const char* what = "";  // the collective's name, for messages
  int64_t seq = 0;        // the communicator's number for the call (CollRequest::seq)
  int64_t bytes = 0;      // for the ledger
  int64_t wire_bytes = 0;
  std::vector<std::function<void(Channel&, Op&)>> steps;
  size_t next = 0;
  size_t local_tail = 0;  // trailing steps that post nothing (divide, copy out, check a count)
  std::vector<MPI_Request> reqs;     // the current step's requests
  std::vector<MPI_Status> statuses;  // of the last completed requests
  std::vector<char> scratch, check;  // staging and argument-check buffers owned by the op
  std::vector<int> ints;             // counts and displacements: MPI reads them until done
  bool started = false, done = false;
  bool eager = false;  // a send: finished for its caller once posted from a copy of its buffer
  std::chrono::steady_clock::time_point issued, began;

  // Every MPI call of the op is posted: later ops may start (the local tail runs later).
  bool posted_all() const { return next + local_tail >= steps.size(); }
  bool finished_for_caller() const { return done || (eager && posted_all()); }
};

// The MPI state of one communicator, shared by MpiComm and its Works (which hold it weakly:
// a Work that outlives its communicator reports that instead of touching freed MPI state).
class Channel {
 public:
  Channel(std::shared_ptr<World> world, MPI_Comm comm, std::string axis, std::vector<int> members);
  ~Channel();

  World& world() { return *world_; }
  const std::shared_ptr<World>& world_ptr() const { return world_; }
  MPI_Comm comm() const { return comm_; }
  const std::string& axis() const { return axis_; }
  int rank() const { return rank_; }
  int id() const { return id_; }  // the world's number for it (World::progress_locked)
  int size() const { return static_cast<int>(members_.size()); }
  int global_rank(int member) const { return members_[member]; }
  CommLedger& ledger() { return ledger_; }

  // "all_reduce on axis dp"
  std::string where(const char* what) const { return std::string(what) + " on axis " + axis_; }
  // Throws DT_ERR_COMM naming the call, the axis and MPI's message, unless rc is success.
  void check(int rc, const char* what) const;

  // With mpi_mutex() held.
  void enqueue(std::shared_ptr<Op> op) { queue_.push_back(std::move(op)); }
  // Starts and advances queued ops in order; retires finished ones. Throws on MPI errors.
  void pump();
  // The timeout message for the oldest unfinished op, with what a status check of the
  // members found (World::status_check_locked). With mpi_mutex() held.
  std::string timeout_message() const;

 private:
  bool advance(Op& op);  // true once op is done

  std::shared_ptr<World> world_;
  MPI_Comm comm_;
  std::string axis_;
  std::vector<int> members_;
  int rank_ = 0;
  int id_ = 0;
  CommLedger ledger_;
  std::deque<std::shared_ptr<Op>> queue_;
};

class MpiComm : public Communicator {
 public:
  explicit MpiComm(std::shared_ptr<Channel> channel) : ch_(std::move(channel)) {}
  int rank() const override { return ch_->rank(); }
  int size() const override { return ch_->size(); }
  const std::string& axis() const override { return ch_->axis(); }
  CommLedger& ledger() override { return ch_->ledger(); }

 protected:
  WorkPtr issue(const CollRequest& request, bool blocking) override;

 private:
  std::shared_ptr<Channel> ch_;
};

// The steps of one request (mpi_reductions.cc, mpi_transfers.cc).
void build_reduction(Channel& ch, const CollRequest& r, Op& op);  // all-reduce, reduce-scatter, reduce
void build_transfer(Channel& ch, const CollRequest& r, Op& op);   // the rest
// With check_args: prepends steps that all-gather every member's arguments and fail with
// DT_ERR_COMM, on every member alike, when they differ (mpi_check.cc).
void add_argument_check(Channel& ch, const CollRequest& r, Op& op);

// An element count as MPI's int; DT_ERR_UNSUPPORTED past 2^31 - 1.
int mpi_count(int64_t n, const Channel& ch, const char* what);
// Do [a, a + na) and [b, b + nb) (bytes) share a byte?
inline bool overlaps(const void* a, int64_t na, const void* b, int64_t nb) {
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return na > 0 && nb > 0 && pa < pb + static_cast<uintptr_t>(nb) && pb < pa + static_cast<uintptr_t>(na);
}

}  // namespace dt::comm::mpi
