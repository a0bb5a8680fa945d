// All-gather over shared memory: every member copies each member's piece straight from
// its send buffer. In place (send == recv + rank*count) the own piece is already there.
#include "comm/local/algo_util.h"
#include "comm/local/local_comm.h"

namespace dt::comm::local {

void run_all_gather(Group& g, int me, const void* send, void* recv, int64_t count, DType dtype) {
  const char* what = "all_gather";
  publish(g, me, slot_of(CollKind::AllGather, dtype, count, send, recv), what);
  for (int p = 0; p < g.size(); ++p) copy_elems(at(recv, p * count, dtype), g.slot(p).send, count, dtype);
  g.fence(me, what);  // peers have finished reading this member's send
}

}  // namespace dt::comm::local
