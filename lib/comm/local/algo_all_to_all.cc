// All-to-all (equal or uneven splits) over shared memory: member r copies, from each
// member p, the block p addressed to r. Counts are checked against each other first: a
// peer's send count must equal this member's receive count.
#include <vector>

#include "comm/local/algo_util.h"
#include "comm/local/local_comm.h"

namespace dt::comm::local {

void run_all_to_all(Group& g, int me, const void* send, const int64_t* send_counts, void* recv,
                    const int64_t* recv_counts, DType dtype) {
  const char* what = "all_to_all";
  const int n = g.size();
  Slot s = slot_of(CollKind::AllToAll, dtype, 0, send, recv);
  s.send_counts = send_counts;
  s.recv_counts = recv_counts;
  publish(g, me, s, what);
  // Every member checks the whole matrix, so all of them agree on failing; they meet
  // before failing, since the counts they read live in each member's own request.
  std::string mismatch;
  for (int p = 0; p < n && mismatch.empty(); ++p)
    for (int q = 0; q < n && mismatch.empty(); ++q)
      if (g.slot(p).send_counts[q] != g.slot(q).recv_counts[p])
        mismatch = std::string(what) + " on axis " + g.axis() + ": rank " + std::to_string(g.global_rank(p)) +
                   " sends " + std::to_string(g.slot(p).send_counts[q]) + " elements to rank " +
                   std::to_string(g.global_rank(q)) + ", which expects " + std::to_string(g.slot(q).recv_counts[p]);
  if (!mismatch.empty()) {
    g.fence(me, what);
    g.world().fail(DT_ERR_COMM, mismatch);
    g.world().throw_failure();
  }
  int64_t out = 0;
  for (int p = 0; p < n; ++p) {
    const Slot& ps = g.slot(p);
    int64_t offset = 0;
    for (int q = 0; q < me; ++q) offset += ps.send_counts[q];
    copy_elems(at(recv, out, dtype), at(ps.send, offset, dtype), recv_counts[p], dtype);
    out += recv_counts[p];
  }
  g.fence(me, what);
}

}  // namespace dt::comm::local
