#include "comm/mpi/mpi_comm.h"

#include <algorithm>
#include <climits>

namespace dt::comm::mpi {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A Work polls its op through the channel: MPI progresses only inside MPI calls.
class MpiWork : public Work {
 public:
  MpiWork(const std::shared_ptr<Channel>& ch, std::shared_ptr<Op> op)
      : ch_(ch), world_(ch->world_ptr()), op_(std::move(op)) {}

  bool test() override {
    std::lock_guard<std::mutex> lk(mpi_mutex());
    if (op_->finished_for_caller()) return true;  // finished before any later failure: valid
    auto ch = channel();
    world_->poll_locked();
    try {
      ch->pump();
    } catch (const Error& e) {
      world_->fail(e.code(), e.what());
    }
    if (!world_->failed()) {
      if (op_->finished_for_caller()) return true;
      // test() alone never blocks, so its deadline counts from the issue.
      if (seconds_since(op_->issued) > world_->timeout_s()) world_->fail(DT_ERR_TIMEOUT, ch->timeout_message());
    }
    if (world_->failed()) world_->poll_locked();  // tells the peers, then throws
    return false;
  }

  void wait() override {
    std::shared_ptr<Channel> ch;
    {
      std::lock_guard<std::mutex> lk(mpi_mutex());
      if (op_->finished_for_caller()) return;
      ch = channel();
    }
    world_->wait(
        [&] {
          ch->pump();
          return op_->finished_for_caller();
        },
        [&] { return ch->timeout_message(); });
  }

 private:
  std::shared_ptr<Channel> channel() {
    auto ch = ch_.lock();
    if (!ch) {
      world_->poll_locked();  // a failed world explains why the op never finished
      fail(DT_ERR_COMM, std::string(op_->what) + ": its communicator was destroyed before it finished");
    }
    return ch;
  }

  std::weak_ptr<Channel> ch_;
  std::shared_ptr<World> world_;
  std::shared_ptr<Op> op_;
};

}  // namespace

int mpi_count(int64_t n, const Channel& ch, const char* what) {
  if (n > INT_MAX)
    fail(DT_ERR_UNSUPPORTED, ch.where(what) + ": " + std::to_string(n) +
                                 " elements in one MPI call; the mpi backend moves at most 2^31 - 1 per call "
                                 "(split the buffer)");
  return static_cast<int>(n);
}

Channel::Channel(std::shared_ptr<World> world, MPI_Comm comm, std::string axis, std::vector<int> members)
    : world_(std::move(world)), comm_(comm), axis_(std::move(axis)), members_(std::move(members)) {
  std::lock_guard<std::mutex> lk(mpi_mutex());
  MPI_Comm_rank(comm_, &rank_);
  id_ = world_->add_channel_locked();
}

Channel::~Channel() {
  if (!mpi_usable()) return;
  // Work the host issued but never waited for: finish it, so the peers are not left
  // waiting and the communicator can be freed.
  try {
    if (!world_->failed() && !queue_.empty())
      world_->wait(
          [&] {
            pump();
            return queue_.empty();
          },
          [&] { return timeout_message(); });
  } catch (...) {
    // The world is failed now; its next call reports it.
  }
  std::lock_guard<std::mutex> lk(mpi_mutex());
  if (world_->failed()) {
    // MPI may still write into these ops' buffers; and the communicator is never freed, so
    // its context id is never reused while stale messages may arrive for it.
    for (auto& op : queue_) keep_forever(op);
    return;
  }
  MPI_Comm_free(&comm_);
}

void Channel::check(int rc, const char* what) const {
  if (rc != MPI_SUCCESS) fail(DT_ERR_COMM, where(what) + ": MPI error: " + mpi_error_string(rc));
}

bool Channel::advance(Op& op) {
  for (;;) {
    if (!op.reqs.empty()) {
      int flag = 0;
      op.statuses.assign(op.reqs.size(), MPI_Status{});
      int rc = MPI_Testall(static_cast<int>(op.reqs.size()), op.reqs.data(), &flag, op.statuses.data());
      if (rc == MPI_ERR_IN_STATUS)
        for (const MPI_Status& st : op.statuses)
          if (st.MPI_ERROR != MPI_SUCCESS && st.MPI_ERROR != MPI_ERR_PENDING) {
            rc = st.MPI_ERROR;
            break;
          }
      check(rc, op.what);
      if (!flag) return false;
      op.reqs.clear();
    }
    if (op.next == op.steps.size()) {
      op.done = true;
      ledger_.record(op.kind, op.bytes, op.wire_bytes, seconds_since(op.began));
      auto& finished = world_->progress_locked(id_).finished;
      finished = std::max(finished, op.seq);
      return true;
    }
    auto& step = op.steps[op.next++];
    step(*this, op);
  }
}

void Channel::pump() {
  bool may_start = true;
  for (auto& op : queue_) {
    if (!op->started) {
      if (!may_start) break;  // an earlier op has steps left to post: keep the order
      op->started = true;
      op->began = std::chrono::steady_clock::now();
    }
    if (!op->done) advance(*op);
    may_start = op->posted_all();
  }
  while (!queue_.empty() && queue_.front()->done) queue_.pop_front();
}

std::string Channel::timeout_message() const {
  const char* what = "operation";
  int64_t seq = 0;
  for (const auto& op : queue_)
    if (!op->done) {
      what = op->what;
      seq = op->seq;
      break;
    }
  return timeout_text(what, axis_, seq, members_[rank_], world_->timeout_s()) + ": " +
         world_->status_check_locked(id_, seq, members_);
}

WorkPtr MpiComm::issue(const CollRequest& r, bool blocking) {
  World& w = ch_->world();
  auto op = std::make_shared<Op>();
  op->kind = r.kind;
  op->what = coll_name(r.kind);
  op->seq = r.seq;
  op->bytes = r.bytes;
  op->wire_bytes = r.wire_bytes;
  op->issued = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lk(mpi_mutex());
    w.poll_locked();  // a failed world takes no new work
    // Building only checks arguments and plans steps: an error here leaves the world healthy.
    if (w.check_args() && r.kind != CollKind::Send && r.kind != CollKind::Recv) add_argument_check(*ch_, r, *op);
    if (r.kind == CollKind::AllReduce || r.kind == CollKind::ReduceScatter || r.kind == CollKind::Reduce)
      build_reduction(*ch_, r, *op);
    else
      build_transfer(*ch_, r, *op);
    ch_->enqueue(op);
    w.progress_locked(ch_->id()).issued = r.seq;  // what a peer's status check hears
    try {
      ch_->pump();  // post what can be posted now, so the op progresses during compute
    } catch (const Error& e) {
      w.fail(e.code(), e.what());
      w.poll_locked();
    }
  }
  auto work = std::make_shared<MpiWork>(ch_, op);
  if (!blocking) return work;
  work->wait();
  return completed_work();
}

}  // namespace dt::comm::mpi
