#include "parallel/tp_strategy.h"

#include "kernels/ops.h"

namespace dt::parallel {

void TpStrategy::sum_squared_norm(const nn::ParamList& params, double& sq) {
  // The replicated parameters' share, counted once: whatever sq held beyond the split
  // parameters' parts (another strategy's sum over its own axis included) stays as it is.
  double replicated = 0.0;
  for (const nn::Parameter* p : params)
    if (p->spec.replicated()) replicated += kernels::sum_squares(p->grad);
  sq = exact_sum(tp_, sq - replicated, device_) + replicated;
}

}  // namespace dt::parallel
