// A member of a local Group as a Communicator. Blocking calls run on the caller's thread;
// *_async calls run, in issue order, on this member's own progress thread (started on
// first use), so a rank can overlap communication with compute. A blocking call issued
// while async work is queued waits behind it, keeping the group's order intact.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "comm/local/world.h"

namespace dt::comm::local {

class LocalComm : public Communicator {
 public:
  LocalComm(std::shared_ptr<Group> group, int member);
  ~LocalComm() override;

  int rank() const override { return me_; }
  int size() const override { return group_->size(); }
  const std::string& axis() const override { return group_->axis(); }
  CommLedger& ledger() override { return ledger_; }

  Group& group() { return *group_; }

 protected:
  WorkPtr issue(const CollRequest& request, bool blocking) override;

 private:
  void execute(const CollRequest& r);  // runs the algorithm on the calling thread
  void progress_loop();

  std::shared_ptr<Group> group_;
  int me_;
  CommLedger ledger_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // async work, in issue order
  bool busy_ = false;
  bool stop_ = false;
  std::thread progress_;
};

// The algorithms, one per file (local/algo_*.cc). `me` is the caller's member index; each
// publishes its slot, meets the group at barriers and moves data through shared memory.
void run_all_reduce(Group& g, int me, const void* send, void* recv, int64_t count, DType dtype, ReduceOp op);
void run_all_gather(Group& g, int me, const void* send, void* recv, int64_t count, DType dtype);
void run_reduce_scatter(Group& g, int me, const void* send, void* recv, int64_t count, DType dtype, ReduceOp op);
void run_broadcast(Group& g, int me, const void* send, void* recv, int64_t count, DType dtype, int root);
void run_reduce(Group& g, int me, const void* send, void* recv, int64_t count, DType dtype, ReduceOp op, int root);
void run_all_to_all(Group& g, int me, const void* send, const int64_t* send_counts, void* recv,
                    const int64_t* recv_counts, DType dtype);
void run_send(Group& g, int me, const void* buf, int64_t count, DType dtype, int peer, int tag);
void run_recv(Group& g, int me, void* buf, int64_t count, DType dtype, int peer, int tag);

}  // namespace dt::comm::local
