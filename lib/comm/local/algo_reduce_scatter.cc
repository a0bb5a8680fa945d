// Reduce-scatter over shared memory: member r reduces block r of every member's send
// buffer, in member order, into its recv. In place (recv == send + r*count) member r only
// writes the block no peer reads.
#include <vector>

#include "comm/local/algo_util.h"
#include "comm/local/local_comm.h"

namespace dt::comm::local {

void run_reduce_scatter(Group& g, int me, const void* send, void* recv, int64_t count, DType dtype, ReduceOp op) {
  const char* what = "reduce_scatter";
  const int n = g.size();
  publish(g, me, slot_of(CollKind::ReduceScatter, dtype, count, send, recv, op), what);
  std::vector<const void*> srcs(n);
  for (int p = 0; p < n; ++p) srcs[p] = at(g.slot(p).send, me * count, dtype);
  reduce_into(op, dtype, srcs, recv, count);
  g.fence(me, what);
}

}  // namespace dt::comm::local
