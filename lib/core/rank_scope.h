// The rank a thread is working for. Mesh::run sets it on every rank thread (and on the
// caller's thread when it runs the one local rank itself), so that what the thread does is
// credited to that rank: the memory it allocates (the per-rank ledger, core/allocator.h)
// and the spans it records (core/trace.h). -1 when the thread works for no rank.
#pragma once

namespace dt {

int current_rank();

// While alive, this thread works for `rank`; the previous rank comes back after.
class ScopedRank {
 public:
  explicit ScopedRank(int rank);
  ~ScopedRank();
  ScopedRank(const ScopedRank&) = delete;
  ScopedRank& operator=(const ScopedRank&) = delete;

 private:
  int previous_;
};

}  // namespace dt
