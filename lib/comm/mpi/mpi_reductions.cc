// The reductions over MPI: all-reduce, reduce-scatter, reduce.
//
// All-reduce must give bitwise identical results on every rank. Floating types: a
// reduce-scatter (MPI_Ireduce_scatter, blocks as even as possible) then an all-gather
// (MPI_Iallgatherv in place), so each element is reduced on one rank only and copied to
// the others: identical by construction, whatever algorithm Open MPI picks and however the
// op rounds (a plain MPI_Iallreduce guarantees this only for some algorithms). The cost:
// Open MPI 4.1's nonblocking reduce-scatter (libnbc) is a binomial reduce to rank 0 plus a
// scatter, not a ring, so large floating all-reduces are not bandwidth-optimal yet.
// Integers: wrapping sum and product, max and min are exactly associative and commutative,
// so MPI_Iallreduce is identical everywhere with any algorithm, and is used directly.
// Avg is a Sum that is then divided: by the block's owner for floats, by every rank (on
// identical sums) for integers.
#include <algorithm>
#include <cstring>

#include "comm/mpi/mpi_comm.h"

namespace dt::comm::mpi {
namespace {

void* byte_at(void* p, int64_t elems, size_t esz) { return static_cast<char*>(p) + elems * static_cast<int64_t>(esz); }

void integer_all_reduce(Channel& ch, const CollRequest& r, Op& op) {
  const int n = ch.size();
  const int count = mpi_count(r.count, ch, op.what);
  const void* send = r.send;
  void* recv = r.recv;
  const DType dtype = r.dtype;
  const ReduceOp rop = r.op;
  const int64_t bytes = r.count * static_cast<int64_t>(dtype_size(r.dtype));
  const bool staged = send != recv && overlaps(send, bytes, recv, bytes);  // MPI forbids overlap
  op.steps.push_back([=](Channel& c, Op& o) {
    const char* s = static_cast<const char*>(send);
    if (staged) o.scratch.assign(s, s + bytes);
    const void* src = send == recv ? MPI_IN_PLACE : staged ? static_cast<const void*>(o.scratch.data()) : send;
    MPI_Request q;
    c.check(MPI_Iallreduce(src, recv, count, mpi_type(dtype), mpi_op(dtype, rop), c.comm(), &q),
            o.what);
    o.reqs.push_back(q);
  });
  if (rop != ReduceOp::Avg) return;
  ++op.local_tail;
  op.steps.push_back([=](Channel&, Op&) { divide(recv, count, dtype, n); });
}

void all_reduce(Channel& ch, const CollRequest& r, Op& op) {
  if (!is_floating(r.dtype)) return integer_all_reduce(ch, r, op);
  const int n = ch.size(), me = ch.rank();
  const size_t esz = dtype_size(r.dtype);
  mpi_count(r.count, ch, op.what);
  // ints = [counts..., displs...]; MPI reads them until the op completes.
  op.ints.assign(2 * static_cast<size_t>(n), 0);
  for (int p = 0; p < n; ++p) {
    int64_t lo = r.count * p / n, hi = r.count * (p + 1) / n;
    op.ints[p] = static_cast<int>(hi - lo);
    op.ints[n + p] = static_cast<int>(lo);
  }
  op.scratch.resize(std::max<size_t>(1, static_cast<size_t>(op.ints[me]) * esz));  // this rank's block
  const void* send = r.send;
  void* recv = r.recv;
  const DType dtype = r.dtype;
  const ReduceOp rop = r.op;
  // In place (send == recv) is safe: recv is written only once the reduce-scatter is done.
  op.steps.push_back([=](Channel& c, Op& o) {
    MPI_Request q;
    c.check(MPI_Ireduce_scatter(send, o.scratch.data(), o.ints.data(), mpi_type(dtype), mpi_op(dtype, rop),
                                c.comm(), &q),
            o.what);
    o.reqs.push_back(q);
  });
  op.steps.push_back([=](Channel& c, Op& o) {
    const int mine = o.ints[me];
    if (rop == ReduceOp::Avg) divide(o.scratch.data(), mine, dtype, n);
    std::memcpy(byte_at(recv, o.ints[n + me], esz), o.scratch.data(), static_cast<size_t>(mine) * esz);
    MPI_Request q;
    c.check(MPI_Iallgatherv(MPI_IN_PLACE, 0, mpi_type(dtype), recv, o.ints.data(), o.ints.data() + n,
                            mpi_type(dtype), c.comm(), &q),
            o.what);
    o.reqs.push_back(q);
  });
}

void reduce_scatter(Channel& ch, const CollRequest& r, Op& op) {
  const int n = ch.size();
  const size_t esz = dtype_size(r.dtype);
  mpi_count(r.count * n, ch, op.what);
  const int64_t block = r.count * static_cast<int64_t>(esz);
  // MPI forbids overlapping buffers (and its MPI_IN_PLACE puts the result at the start of
  // the buffer, not at block `rank`), so an overlapping recv is staged through scratch.
  const bool staged = overlaps(r.send, block * n, r.recv, block);
  if (staged) op.scratch.resize(static_cast<size_t>(block));
  const void* send = r.send;
  void* recv = r.recv;
  const DType dtype = r.dtype;
  const ReduceOp rop = r.op;
  const int count = static_cast<int>(r.count);
  op.steps.push_back([=](Channel& c, Op& o) {
    MPI_Request q;
    c.check(MPI_Ireduce_scatter_block(send, staged ? o.scratch.data() : recv, count, mpi_type(dtype),
                                      mpi_op(dtype, rop), c.comm(), &q),
            o.what);
    o.reqs.push_back(q);
  });
  if (staged || rop == ReduceOp::Avg) {
    ++op.local_tail;
    op.steps.push_back([=](Channel&, Op& o) {
      void* dst = staged ? static_cast<void*>(o.scratch.data()) : recv;
      if (rop == ReduceOp::Avg) divide(dst, count, dtype, n);
      if (staged) std::memcpy(recv, dst, static_cast<size_t>(block));
    });
  }
}

void reduce(Channel& ch, const CollRequest& r, Op& op) {
  const int n = ch.size();
  const bool root = ch.rank() == r.root;
  const int64_t bytes = r.count * static_cast<int64_t>(dtype_size(r.dtype));
  const int count = mpi_count(r.count, ch, op.what);
  // On the root: send == recv is MPI_IN_PLACE; any other overlap is staged.
  const bool in_place = root && r.send == r.recv;
  const bool staged = root && !in_place && overlaps(r.send, bytes, r.recv, bytes);
  if (staged) op.scratch.resize(static_cast<size_t>(bytes));
  const void* send = r.send;
  void* recv = r.recv;
  const DType dtype = r.dtype;
  const ReduceOp rop = r.op;
  const int root_rank = r.root;
  op.steps.push_back([=](Channel& c, Op& o) {
    void* dst = !root ? nullptr : staged ? static_cast<void*>(o.scratch.data()) : recv;
    MPI_Request q;
    c.check(MPI_Ireduce(in_place ? MPI_IN_PLACE : send, dst, count, mpi_type(dtype), mpi_op(dtype, rop), root_rank,
                        c.comm(), &q),
            o.what);
    o.reqs.push_back(q);
  });
  if (root && (staged || rop == ReduceOp::Avg)) {
    ++op.local_tail;
    op.steps.push_back([=](Channel&, Op& o) {
      void* dst = staged ? static_cast<void*>(o.scratch.data()) : recv;
      if (rop == ReduceOp::Avg) divide(dst, count, dtype, n);
      if (staged) std::memcpy(recv, dst, static_cast<size_t>(bytes));
    });
  }
}

}  // namespace

void build_reduction(Channel& ch, const CollRequest& r, Op& op) {
  if (r.count == 0) return;  // every member has count 0 (SPMD; checked with check_args)
  switch (r.kind) {
    case CollKind::AllReduce: return all_reduce(ch, r, op);
    case CollKind::ReduceScatter: return reduce_scatter(ch, r, op);
    case CollKind::Reduce: return reduce(ch, r, op);
    default: DT_ASSERT(false);
  }
}

}  // namespace dt::comm::mpi
