// Broadcast over shared memory: every member copies from the root's send buffer.
#include "comm/local/algo_util.h"
#include "comm/local/local_comm.h"

namespace dt::comm::local {

void run_broadcast(Group& g, int me, const void* send, void* recv, int64_t count, DType dtype, int root) {
  const char* what = "broadcast";
  publish(g, me, slot_of(CollKind::Broadcast, dtype, count, send, recv, ReduceOp::Sum, root), what);
  copy_elems(recv, g.slot(root).send, count, dtype);
  g.fence(me, what);  // the root's buffer may change only after everyone has copied
}

}  // namespace dt::comm::local
