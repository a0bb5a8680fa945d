// The Communicator interface: the collectives every strategy is built from, over a group
// of ranks. Backends (local threads, Open MPI, NCCL) implement it; one algorithm per file.
//
// Buffers are raw pointers on the communicator's device, counted in elements of `dtype`.
// A call is out-of-place unless send == recv (in-place), with the layouts below. Every
// member of the group must make the same calls in the same order (SPMD); a debug option
// checks that they agree on kind, dtype, count and root.
//
// Each operation exists as *_async, returning a Work handle, and as a blocking call.
// Operations of one communicator run in the order they were issued. Arguments are
// validated here, once, for every backend.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/coll_history.h"
#include "comm/comm_ledger.h"
#include "core/dtype.h"
#include "kernels/ops.h"

namespace dt::comm {

using kernels::ReduceOp;

class Work {
 public:
  virtual ~Work() = default;
  // True once the operation has finished; rethrows its error (TIMEOUT, ABORTED, COMM).
  virtual bool test() = 0;
  // Blocks until the operation has finished; rethrows its error.
  virtual void wait() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

// One call, as the backends receive it (validated). `root` is the root of broadcast and
// reduce, or the peer of send and recv.
struct CollRequest {
  CollKind kind = CollKind::Barrier;
  const void* send = nullptr;
  void* recv = nullptr;
  int64_t count = 0;
  DType dtype = DType::F32;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  int tag = 0;
  std::vector<int64_t> send_counts, recv_counts;  // all-to-all only
  int64_t bytes = 0;       // this rank's contribution, for the ledger
  int64_t wire_bytes = 0;  // what a bandwidth-optimal algorithm delivers to it (comm_ledger.h)
  int64_t seq = 0;         // this communicator's count of calls, this one included (1, 2, ...)
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The mesh axis (or axes, "dp*cp") this group spans; "world" for all ranks.
  virtual const std::string& axis() const = 0;
  virtual CommLedger& ledger() = 0;
  // Where this communicator records its calls (coll_history.h). The mesh gives all the
  // communicators of one rank the same history; a communicator made alone keeps its own.
  CollHistory& history() { return *history_; }
  void set_history(std::shared_ptr<CollHistory> history) { history_ = std::move(history); }
  // The sequence number of the last call issued (0 before the first).
  int64_t last_seq() const { return seq_.load(std::memory_order_relaxed); }

  // recv[i] = op over ranks of send[i]; count elements.
  WorkPtr all_reduce_async(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op);
  // recv = [send of rank 0, ..., send of rank n-1]; send has count elements, recv n*count.
  WorkPtr all_gather_async(const void* send, void* recv, int64_t count, DType dtype);
  // recv = block `rank` of the reduction of send; send has n*count elements, recv count.
  WorkPtr reduce_scatter_async(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op);
  // recv (every rank) = send of `root`; send is read on root only (may be null elsewhere).
  WorkPtr broadcast_async(const void* send, void* recv, int64_t count, DType dtype, int root);
  // recv on `root` = op over ranks of send; recv is ignored elsewhere (may be null).
  WorkPtr reduce_async(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op, int root);
  // Rank r sends send_counts[p] elements to each peer p (blocks packed in peer order) and
  // receives recv_counts[p] from each (packed likewise). Equal splits: all counts equal.
  // recv_counts[p] on rank r must equal send_counts[r] on rank p. Never in place.
  WorkPtr all_to_all_async(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                           const std::vector<int64_t>& recv_counts, DType dtype);
  // Point to point; a send matches the recv of the same peer pair and tag, in order.
  WorkPtr send_async(const void* buf, int64_t count, DType dtype, int peer, int tag = 0);
  WorkPtr recv_async(void* buf, int64_t count, DType dtype, int peer, int tag = 0);
  WorkPtr barrier_async();

  // Blocking forms: the same, waited for (a backend may run them on the calling thread).
  void all_reduce(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op);
  void all_gather(const void* send, void* recv, int64_t count, DType dtype);
  void reduce_scatter(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op);
  void broadcast(const void* send, void* recv, int64_t count, DType dtype, int root);
  void reduce(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op, int root);
  void all_to_all(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                  const std::vector<int64_t>& recv_counts, DType dtype);
  void send(const void* buf, int64_t count, DType dtype, int peer, int tag = 0);
  void recv(void* buf, int64_t count, DType dtype, int peer, int tag = 0);
  void barrier();

 protected:
  // The one entry a backend implements. `blocking`: the caller waits at once.
  virtual WorkPtr issue(const CollRequest& request, bool blocking) = 0;

 private:
  WorkPtr start(CollRequest request, bool blocking);  // validates, numbers, records, then issue()

  std::atomic<int64_t> seq_{0};
  std::shared_ptr<CollHistory> history_ = std::make_shared<CollHistory>();
};

// A Work that is already complete.
WorkPtr completed_work();

// For destructors of whatever owns a Work's buffers: waits for `work` (if any) so the
// buffers outlive the collective, and drops its error (the step that issued it reports it).
void wait_ignoring_errors(const WorkPtr& work);

}  // namespace dt::comm
