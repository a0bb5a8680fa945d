// The data movements over MPI: all-gather, broadcast, all-to-all, send, recv, barrier.
// One nonblocking MPI call each; buffers that overlap in a way MPI forbids are staged.
#include <cstring>

#include "comm/mpi/mpi_comm.h"

namespace dt::comm::mpi {
namespace {

// MPI wants a valid address even for zero elements; validation lets NULL through then.
void* nonnull(void* p, Op& op) {
  if (p) return p;
  if (op.scratch.empty()) op.scratch.resize(1);
  return op.scratch.data();
}
const void* nonnull(const void* p, Op& op) { return p ? p : nonnull(static_cast<void*>(nullptr), op); }

void all_gather(Channel& ch, const CollRequest& r, Op& op) {
  const int n = ch.size(), me = ch.rank();
  const int64_t bytes = r.count * static_cast<int64_t>(dtype_size(r.dtype));
  mpi_count(r.count * n, ch, op.what);
  const int count = static_cast<int>(r.count);
  const bool in_place = r.send == static_cast<const char*>(r.recv) + bytes * me;
  const bool staged = !in_place && overlaps(r.send, bytes, r.recv, bytes * n);
  const void* send = r.send;
  void* recv = r.recv;
  const DType dtype = r.dtype;
  op.steps.push_back([=](Channel& c, Op& o) {
    if (staged) o.scratch.assign(static_cast<const char*>(send), static_cast<const char*>(send) + bytes);
    const void* src = in_place ? MPI_IN_PLACE : staged ? o.scratch.data() : send;
    MPI_Request q;
    c.check(MPI_Iallgather(src, count, mpi_type(dtype), recv, count, mpi_type(dtype), c.comm(), &q), o.what);
    o.reqs.push_back(q);
  });
}

void broadcast(Channel& ch, const CollRequest& r, Op& op) {
  const bool root = ch.rank() == r.root;
  const int count = mpi_count(r.count, ch, op.what);
  const size_t bytes = static_cast<size_t>(r.count) * dtype_size(r.dtype);
  const void* send = r.send;
  void* recv = r.recv;
  const DType dtype = r.dtype;
  const int root_rank = r.root;
  op.steps.push_back([=](Channel& c, Op& o) {
    if (root && send != recv) std::memmove(recv, send, bytes);  // MPI broadcasts one buffer
    MPI_Request q;
    c.check(MPI_Ibcast(recv, count, mpi_type(dtype), root_rank, c.comm(), &q), o.what);
    o.reqs.push_back(q);
  });
}

void all_to_all(Channel& ch, const CollRequest& r, Op& op) {
  const int n = ch.size();
  const size_t esz = dtype_size(r.dtype);
  // ints = [send counts, send displs, recv counts, recv displs], read by MPI until done.
  op.ints.assign(4 * static_cast<size_t>(n), 0);
  int64_t sent = 0, got = 0;
  for (int p = 0; p < n; ++p) {
    op.ints[n + p] = mpi_count(sent, ch, op.what);
    op.ints[p] = mpi_count(r.send_counts[p], ch, op.what);
    op.ints[3 * n + p] = mpi_count(got, ch, op.what);
    op.ints[2 * n + p] = mpi_count(r.recv_counts[p], ch, op.what);
    sent += r.send_counts[p];
    got += r.recv_counts[p];
  }
  const int64_t send_bytes = sent * static_cast<int64_t>(esz);
  const bool staged = overlaps(r.send, send_bytes, r.recv, got * static_cast<int64_t>(esz));
  const void* send = r.send;
  void* recv = r.recv;
  const DType dtype = r.dtype;
  op.steps.push_back([=](Channel& c, Op& o) {
    if (staged) o.scratch.assign(static_cast<const char*>(send), static_cast<const char*>(send) + send_bytes);
    const void* src = staged ? static_cast<const void*>(o.scratch.data()) : nonnull(send, o);
    void* dst = nonnull(recv, o);
    const int* ints = o.ints.data();
    MPI_Request q;
    c.check(MPI_Ialltoallv(src, ints, ints + n, mpi_type(dtype), dst, ints + 2 * n, ints + 3 * n, mpi_type(dtype),
                           c.comm(), &q),
            o.what);
    o.reqs.push_back(q);
  });
}

void check_tag(const Channel& ch, const char* what, int tag) {
  int* ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);
  const int max_tag = found && ub ? *ub : 32767;  // 32767: the least MPI guarantees
  DT_CHECK(tag >= 0 && tag <= max_tag, ch.where(what) + ": tag = " + std::to_string(tag) +
                                           "; accepted for backend \"mpi\": 0 to " + std::to_string(max_tag));
}

// Eager, as the local backend: the send is finished for its caller once its buffer is
// copied and posted, so a blocking send never waits for the receiver (a ring of send-then-
// recv, or receives taking tags in another order, cannot deadlock). The channel keeps the
// MPI request and retires it (and records it in the ledger) when the receiver has it.
void send(Channel& ch, const CollRequest& r, Op& op) {
  check_tag(ch, op.what, r.tag);
  const int count = mpi_count(r.count, ch, op.what);
  const char* buf = static_cast<const char*>(r.send);
  const size_t bytes = static_cast<size_t>(r.count) * dtype_size(r.dtype);
  const DType dtype = r.dtype;
  const int peer = r.root, tag = r.tag;
  op.eager = true;
  op.steps.push_back([=](Channel& c, Op& o) {
    o.scratch.assign(buf, buf + bytes);
    MPI_Request q;
    c.check(MPI_Isend(nonnull(o.scratch.data(), o), count, mpi_type(dtype), peer, tag, c.comm(), &q), o.what);
    o.reqs.push_back(q);
  });
}

void recv(Channel& ch, const CollRequest& r, Op& op) {
  check_tag(ch, op.what, r.tag);
  const int count = mpi_count(r.count, ch, op.what);
  void* buf = r.recv;
  const DType dtype = r.dtype;
  const int peer = r.root, tag = r.tag;
  op.steps.push_back([=](Channel& c, Op& o) {
    MPI_Request q;
    c.check(MPI_Irecv(nonnull(buf, o), count, mpi_type(dtype), peer, tag, c.comm(), &q), o.what);
    o.reqs.push_back(q);
  });
  // A longer message is MPI_ERR_TRUNCATE; a shorter one arrives silently: name it, as the
  // local backend does, instead of leaving the tail of the buffer stale.
  ++op.local_tail;
  op.steps.push_back([=](Channel& c, Op& o) {
    int got = 0;
    MPI_Get_count(&o.statuses[0], mpi_type(dtype), &got);
    if (got != count)
      fail(DT_ERR_COMM, c.where(o.what) + ": rank " + std::to_string(c.global_rank(peer)) + " sent " +
                            std::to_string(got) + " " + dtype_name(dtype) + " elements (tag " + std::to_string(tag) +
                            "); rank " + std::to_string(c.global_rank(c.rank())) + " expected " +
                            std::to_string(count));
  });
}

}  // namespace

void build_transfer(Channel& ch, const CollRequest& r, Op& op) {
  switch (r.kind) {
    case CollKind::AllGather:
      if (r.count > 0) all_gather(ch, r, op);
      return;
    case CollKind::Broadcast:
      if (r.count > 0) broadcast(ch, r, op);
      return;
    case CollKind::AllToAll: return all_to_all(ch, r, op);  // zero for this rank, not for all
    case CollKind::Send: return send(ch, r, op);            // a zero-length message still matches
    case CollKind::Recv: return recv(ch, r, op);
    case CollKind::Barrier:
      op.steps.push_back([](Channel& c, Op& o) {
        MPI_Request q;
        c.check(MPI_Ibarrier(c.comm(), &q), o.what);
        o.reqs.push_back(q);
      });
      return;
    default: DT_ASSERT(false);
  }
}

}  // namespace dt::comm::mpi
