// Small helpers the local algorithms share.
#pragma once
#include <cstring>

#include "comm/local/world.h"
#include "kernels/ops.h"

namespace dt::comm::local {

inline const char* at(const void* p, int64_t elem, DType t) {
  return static_cast<const char*>(p) + elem * static_cast<int64_t>(dtype_size(t));
}
inline char* at(void* p, int64_t elem, DType t) { return static_cast<char*>(p) + elem * static_cast<int64_t>(dtype_size(t)); }

inline void copy_elems(void* dst, const void* src, int64_t count, DType t) {
  if (count > 0 && dst != src) std::memcpy(dst, src, static_cast<size_t>(count) * dtype_size(t));
}

// [lo, hi) of block `i` when `count` elements are split over `n` as evenly as possible.
inline int64_t block_lo(int64_t count, int n, int i) { return count * i / n; }

// dst = op(srcs...) in member order, on this thread.
inline void reduce_into(ReduceOp op, DType t, const std::vector<const void*>& srcs, void* dst, int64_t count) {
  if (count > 0) kernels::reduce(op, t, Device::cpu(), srcs.data(), static_cast<int>(srcs.size()), dst, count);
}

// The slot a collective publishes: its kind and the arguments the peers read.
inline Slot slot_of(CollKind kind, DType dtype, int64_t count, const void* send, void* recv,
                    ReduceOp op = ReduceOp::Sum, int root = 0) {
  Slot s;
  s.kind = kind;
  s.dtype = dtype;
  s.count = count;
  s.op = op;
  s.root = root;
  s.send = send;
  s.recv = recv;
  return s;
}

// Publishes this member's arguments and meets the others; checks they agree. Every
// algorithm starts with it and ends with a fence (Group::fence), after its last access
// to a peer's memory or slot. In a failed world the slot is left alone: a peer that
// failed a check may still be reading it.
inline void publish(Group& g, int me, const Slot& s, const char* what) {
  g.world().check_healthy();
  g.slot(me) = s;
  g.barrier(me, what);
  g.check_slots(me, what);
}

}  // namespace dt::comm::local
