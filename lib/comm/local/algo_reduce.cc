// Reduce to a root over shared memory: member r reduces block r of every member's send
// buffer (in member order) straight into the root's recv, so all members share the work.
#include <vector>

#include "comm/local/algo_util.h"
#include "comm/local/local_comm.h"

namespace dt::comm::local {

void run_reduce(Group& g, int me, const void* send, void* recv, int64_t count, DType dtype, ReduceOp op, int root) {
  const char* what = "reduce";
  const int n = g.size();
  publish(g, me, slot_of(CollKind::Reduce, dtype, count, send, recv, op, root), what);
  int64_t lo = block_lo(count, n, me), hi = block_lo(count, n, me + 1);
  std::vector<const void*> srcs(n);
  for (int p = 0; p < n; ++p) srcs[p] = at(g.slot(p).send, lo, dtype);
  reduce_into(op, dtype, srcs, at(g.slot(root).recv, lo, dtype), hi - lo);
  g.fence(me, what);
}

}  // namespace dt::comm::local
