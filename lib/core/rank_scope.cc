#include "core/rank_scope.h"

namespace dt {
namespace {
thread_local int t_rank = -1;
}

int current_rank() { return t_rank; }
ScopedRank::ScopedRank(int rank) : previous_(t_rank) { t_rank = rank; }
ScopedRank::~ScopedRank() { t_rank = previous_; }

}  // namespace dt
