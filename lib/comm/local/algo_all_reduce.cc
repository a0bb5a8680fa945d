// All-reduce over shared memory, bitwise identical on every rank.
//  - Large buffers: reduce-scatter then all-gather, in place in the peers' memory. Member
//    r reduces block r of every member's send buffer (always in member order) into its own
//    recv; after a barrier every member copies block p from member p's recv. Each byte is
//    read once per member and written twice, and all members work at once.
//  - Small buffers (latency bound): every member reduces the whole buffer into scratch,
//    in the same order, so the result is the same everywhere; one barrier fewer.
#include <vector>

#include "comm/local/algo_util.h"
#include "comm/local/local_comm.h"

namespace dt::comm::local {
namespace {
constexpr int64_t kSmallBytes = 16 * 1024;
}

void run_all_reduce(Group& g, int me, const void* send, void* recv, int64_t count, DType dtype, ReduceOp op) {
  const char* what = "all_reduce";
  const int n = g.size();
  Slot s;
  s.kind = CollKind::AllReduce;
  s.dtype = dtype;
  s.count = count;
  s.op = op;
  s.send = send;
  s.recv = recv;
  publish(g, me, s, what);
  std::vector<const void*> srcs(n);
  if (count * static_cast<int64_t>(dtype_size(dtype)) <= kSmallBytes) {
    thread_local std::vector<char> scratch;
    scratch.resize(static_cast<size_t>(count) * dtype_size(dtype));
    for (int p = 0; p < n; ++p) srcs[p] = g.slot(p).send;
    reduce_into(op, dtype, srcs, scratch.data(), count);
    g.barrier(me, what);  // every member has read every send buffer
    copy_elems(recv, scratch.data(), count, dtype);
    return;
  }
  int64_t lo = block_lo(count, n, me), hi = block_lo(count, n, me + 1);
  for (int p = 0; p < n; ++p) srcs[p] = at(g.slot(p).send, lo, dtype);
  reduce_into(op, dtype, srcs, at(recv, lo, dtype), hi - lo);
  g.barrier(me, what);  // every block is final in its owner's recv
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    int64_t plo = block_lo(count, n, p), phi = block_lo(count, n, p + 1);
    copy_elems(at(recv, plo, dtype), at(g.slot(p).recv, plo, dtype), phi - plo, dtype);
  }
  g.barrier(me, what);  // nobody reuses its recv while a peer still copies from it
}

}  // namespace dt::comm::local
