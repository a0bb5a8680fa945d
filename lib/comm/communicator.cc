// The non-virtual half of Communicator: argument validation and the blocking forms.
#include "comm/communicator.h"

#include "core/error.h"

namespace dt::comm {
namespace {

std::string where(const CollRequest& r, const char* arg) { return std::string(coll_name(r.kind)) + ": " + arg; }

void check_buffer(const CollRequest& r, const char* arg, const void* p, int64_t count) {
  DT_CHECK(p != nullptr || count == 0,
           where(r, arg) + " is NULL; required: a buffer of " + std::to_string(count) + " elements");
}

void check_rank(const CollRequest& r, const char* arg, int value, int size) {
  DT_CHECK(value >= 0 && value < size, where(r, arg) + " = " + std::to_string(value) + "; accepted: 0 to " +
                                           std::to_string(size - 1) + " (the group has " + std::to_string(size) +
                                           " ranks)");
}

void check_counts(const CollRequest& r, const char* arg, const std::vector<int64_t>& counts, int size) {
  DT_CHECK(static_cast<int>(counts.size()) == size, where(r, arg) + " has " + std::to_string(counts.size()) +
                                                        " entries; required: one per rank, " + std::to_string(size));
  for (size_t i = 0; i < counts.size(); ++i)
    DT_CHECK(counts[i] >= 0, where(r, arg) + "[" + std::to_string(i) + "] = " + std::to_string(counts[i]) +
                                 "; accepted: >= 0");
}

// Runs f() and, if it throws, marks history entry `token` with the error's status before the
// error goes on: the one place a collective's failure reaches its history.
template <typename F>
auto run_recorded(CollHistory& history, uint64_t token, F f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    history.finish(token, e.code());
    throw;
  } catch (...) {
    history.finish(token, DT_ERR_INTERNAL);
    throw;
  }
}

// A backend's Work that marks its history entry when the caller sees it end. An async call
// whose Work is dropped unwaited stays "running" in the history, which is what it was for
// all this rank knows.
class RecordedWork : public Work {
 public:
  RecordedWork(WorkPtr inner, std::shared_ptr<CollHistory> history, uint64_t token)
      : inner_(std::move(inner)), history_(std::move(history)), token_(token) {}
  bool test() override {
    bool done = run_recorded(*history_, token_, [&] { return inner_->test(); });
    if (done) history_->finish(token_, DT_OK);
    return done;
  }
  void wait() override {
    run_recorded(*history_, token_, [&] { inner_->wait(); });
    history_->finish(token_, DT_OK);
  }

 private:
  WorkPtr inner_;
  std::shared_ptr<CollHistory> history_;
  uint64_t token_;
};

int64_t sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

// comm_ledger.h: the bytes a bandwidth-optimal algorithm delivers to this rank.
int64_t wire_bytes(const CollRequest& r, int me, int n) {
  const int64_t esz = static_cast<int64_t>(dtype_size(r.dtype)), n64 = n;
  switch (r.kind) {
    case CollKind::AllReduce: return 2 * (n64 - 1) * r.bytes / n64;
    case CollKind::AllGather: return (n64 - 1) * r.bytes;
    case CollKind::ReduceScatter:
    case CollKind::Reduce: return (n64 - 1) * r.bytes / n64;
    case CollKind::Broadcast: return me == r.root ? 0 : r.count * esz;
    case CollKind::AllToAll: return (sum(r.recv_counts) - r.recv_counts[static_cast<size_t>(me)]) * esz;
    case CollKind::Recv: return r.bytes;
    default: return 0;
  }
}

}  // namespace

WorkPtr Communicator::start(CollRequest r, bool blocking) {
  const int n = size();
  DT_CHECK(dtype_valid(static_cast<int32_t>(r.dtype)), where(r, "dtype") + " is unknown; accepted: f32, bf16, f16, i32, i64");
  DT_CHECK(r.count >= 0, where(r, "count") + " = " + std::to_string(r.count) + "; accepted: >= 0");
  int rop = static_cast<int>(r.op);
  DT_CHECK(rop >= 0 && rop <= static_cast<int>(ReduceOp::Prod),
           where(r, "op") + " = " + std::to_string(rop) + "; accepted: sum, avg, max, min, prod");
  const int64_t esz = static_cast<int64_t>(dtype_size(r.dtype));
  switch (r.kind) {
    case CollKind::AllReduce:
    case CollKind::Reduce:
      check_buffer(r, "send", r.send, r.count);
      if (r.kind == CollKind::Reduce) check_rank(r, "root", r.root, n);
      if (r.kind == CollKind::AllReduce || rank() == r.root) check_buffer(r, "recv", r.recv, r.count);
      r.bytes = r.count * esz;
      break;
    case CollKind::AllGather:
      check_buffer(r, "send", r.send, r.count);
      check_buffer(r, "recv", r.recv, r.count * n);
      r.bytes = r.count * esz;
      break;
    case CollKind::ReduceScatter:
      check_buffer(r, "send", r.send, r.count * n);
      check_buffer(r, "recv", r.recv, r.count);
      r.bytes = r.count * n * esz;
      break;
    case CollKind::Broadcast:
      check_rank(r, "root", r.root, n);
      if (rank() == r.root) check_buffer(r, "send", r.send, r.count);
      check_buffer(r, "recv", r.recv, r.count);
      r.bytes = rank() == r.root ? r.count * esz : 0;
      break;
    case CollKind::AllToAll:
      check_counts(r, "send_counts", r.send_counts, n);
      check_counts(r, "recv_counts", r.recv_counts, n);
      check_buffer(r, "send", r.send, sum(r.send_counts));
      check_buffer(r, "recv", r.recv, sum(r.recv_counts));
      DT_CHECK(r.send == nullptr || r.send != r.recv, where(r, "recv") + " is send; all-to-all is never in place");
      r.bytes = sum(r.send_counts) * esz;
      break;
    case CollKind::Send:
    case CollKind::Recv:
      check_rank(r, "peer", r.root, n);
      DT_CHECK(r.root != rank(), where(r, "peer") + " = " + std::to_string(r.root) + " is this rank; a peer must differ");
      check_buffer(r, "buf", r.kind == CollKind::Send ? r.send : r.recv, r.count);
      r.bytes = r.count * esz;
      break;
    case CollKind::Barrier:
      break;
  }
  r.wire_bytes = wire_bytes(r, rank(), n);
  r.seq = seq_.fetch_add(1, std::memory_order_relaxed) + 1;
  const uint64_t token = history_->begin(r.kind, axis(), r.seq, r.bytes);
  WorkPtr work = run_recorded(*history_, token, [&] { return issue(r, blocking); });
  return std::make_shared<RecordedWork>(std::move(work), history_, token);
}

static CollRequest req(CollKind k, const void* send, void* recv, int64_t count, DType dtype,
                       ReduceOp op = ReduceOp::Sum, int root = 0) {
  CollRequest r;
  r.kind = k;
  r.send = send;
  r.recv = recv;
  r.count = count;
  r.dtype = dtype;
  r.op = op;
  r.root = root;
  return r;
}

static CollRequest a2a(const void* send, const std::vector<int64_t>& sc, void* recv, const std::vector<int64_t>& rc,
                       DType dtype) {
  CollRequest r = req(CollKind::AllToAll, send, recv, 0, dtype);
  r.send_counts = sc;
  r.recv_counts = rc;
  return r;
}

static CollRequest p2p(CollKind k, const void* send, void* recv, int64_t count, DType dtype, int peer, int tag) {
  CollRequest r = req(k, send, recv, count, dtype, ReduceOp::Sum, peer);
  r.tag = tag;
  return r;
}

WorkPtr Communicator::all_reduce_async(const void* s, void* r, int64_t n, DType t, ReduceOp op) {
  return start(req(CollKind::AllReduce, s, r, n, t, op), false);
}
WorkPtr Communicator::all_gather_async(const void* s, void* r, int64_t n, DType t) {
  return start(req(CollKind::AllGather, s, r, n, t), false);
}
WorkPtr Communicator::reduce_scatter_async(const void* s, void* r, int64_t n, DType t, ReduceOp op) {
  return start(req(CollKind::ReduceScatter, s, r, n, t, op), false);
}
WorkPtr Communicator::broadcast_async(const void* s, void* r, int64_t n, DType t, int root) {
  return start(req(CollKind::Broadcast, s, r, n, t, ReduceOp::Sum, root), false);
}
WorkPtr Communicator::reduce_async(const void* s, void* r, int64_t n, DType t, ReduceOp op, int root) {
  return start(req(CollKind::Reduce, s, r, n, t, op, root), false);
}
WorkPtr Communicator::all_to_all_async(const void* s, const std::vector<int64_t>& sc, void* r,
                                       const std::vector<int64_t>& rc, DType t) {
  return start(a2a(s, sc, r, rc, t), false);
}
WorkPtr Communicator::send_async(const void* b, int64_t n, DType t, int peer, int tag) {
  return start(p2p(CollKind::Send, b, nullptr, n, t, peer, tag), false);
}
WorkPtr Communicator::recv_async(void* b, int64_t n, DType t, int peer, int tag) {
  return start(p2p(CollKind::Recv, nullptr, b, n, t, peer, tag), false);
}
WorkPtr Communicator::barrier_async() { return start(req(CollKind::Barrier, nullptr, nullptr, 0, DType::F32), false); }

void Communicator::all_reduce(const void* s, void* r, int64_t n, DType t, ReduceOp op) {
  start(req(CollKind::AllReduce, s, r, n, t, op), true)->wait();
}
void Communicator::all_gather(const void* s, void* r, int64_t n, DType t) {
  start(req(CollKind::AllGather, s, r, n, t), true)->wait();
}
void Communicator::reduce_scatter(const void* s, void* r, int64_t n, DType t, ReduceOp op) {
  start(req(CollKind::ReduceScatter, s, r, n, t, op), true)->wait();
}
void Communicator::broadcast(const void* s, void* r, int64_t n, DType t, int root) {
  start(req(CollKind::Broadcast, s, r, n, t, ReduceOp::Sum, root), true)->wait();
}
void Communicator::reduce(const void* s, void* r, int64_t n, DType t, ReduceOp op, int root) {
  start(req(CollKind::Reduce, s, r, n, t, op, root), true)->wait();
}
void Communicator::all_to_all(const void* s, const std::vector<int64_t>& sc, void* r, const std::vector<int64_t>& rc,
                              DType t) {
  start(a2a(s, sc, r, rc, t), true)->wait();
}
void Communicator::send(const void* b, int64_t n, DType t, int peer, int tag) {
  start(p2p(CollKind::Send, b, nullptr, n, t, peer, tag), true)->wait();
}
void Communicator::recv(void* b, int64_t n, DType t, int peer, int tag) {
  start(p2p(CollKind::Recv, nullptr, b, n, t, peer, tag), true)->wait();
}
void Communicator::barrier() { start(req(CollKind::Barrier, nullptr, nullptr, 0, DType::F32), true)->wait(); }

namespace {
class DoneWork : public Work {
 public:
  bool test() override { return true; }
  void wait() override {}
};
}  // namespace

void wait_ignoring_errors(const WorkPtr& work) {
  if (!work) return;
  try {
    work->wait();
  } catch (...) {
  }
}

WorkPtr completed_work() {
  static WorkPtr done = std::make_shared<DoneWork>();
  return done;
}

}  // namespace dt::comm
