#include "parallel/tp_strategy.h"

#include "core/error.h"

namespace dt::parallel {

TpStrategy::TpStrategy(const ModelUnits& units, comm::Communicator& tp, Device device, bool sequence_parallel,
                       bool fresh_grads_each_micro_batch)
    : tp_(tp),
      device_(device),
      sequence_parallel_(sequence_parallel),
      fresh_grads_(fresh_grads_each_micro_batch),
      partial_(units.params.size()) {
  for (size_t u = 0; u < units.params.size(); ++u)
    for (nn::Parameter* p : units.params[u])
      if (p->grad_partial_over_tp) partial_[u].push_back(p);
}

void TpStrategy::check_micro_batch(const std::string& what, int64_t B, int64_t T) const {
  const int n = tp_.size();
  DT_CHECK(!sequence_parallel_ || (B * T) % n == 0,
           what + ": sequence parallel: " + std::to_string(B * T) + " tokens (batch x sequence, " + std::to_string(B) +
               " x " + std::to_string(T) + " per micro-batch) do not split over tp = " + std::to_string(n) +
               "; accepted: a micro-batch whose B x T divides by " + std::to_string(n));
}

void TpStrategy::after_backward(int unit, Part part, bool last) {
  // Once per step, when the unit's gradients are final: the sums are linear, so summing the
  // accumulated micro-batches once is the same as summing each (summing an accumulation
  // every micro-batch would not be). Fresh gradients each micro-batch: every time.
  const nn::ParamList& ps = partial_[static_cast<size_t>(unit)];
  if (!(last || fresh_grads_) || !grads_final(part) || ps.empty()) return;
  all_reduce_grads(tp_, ps, flat_, device_);
}

double TpStrategy::rows_share(const Tensor& targets, int32_t ignore_index) const {
  if (!sequence_parallel_) return 1.0;
  // This rank's rows of the flattened [B, T] (nn/tensor_parallel.h): [r R/n, (r+1) R/n).
  const int64_t R = targets.numel(), n = tp_.size(), r0 = tp_.rank() * (R / n), r1 = r0 + R / n;
  const int32_t* t = targets.data<int32_t>();
  int64_t all = 0, mine = 0;
  for (int64_t i = 0; i < R; ++i) {
    const bool counted = t[i] != ignore_index;
    all += counted;
    mine += counted && i >= r0 && i < r1;
  }
  return all > 0 ? static_cast<double>(mine) / static_cast<double>(all) : 0.0;
}

void TpStrategy::sum_squared_norm(SquaredNorm& sq) {
  // The split parameters' parts summed over tp; the replicated ones, equal on every tp
  // rank, counted once.
  sq.split = exact_sum(tp_, sq.split, device_);
}

}  // namespace dt::parallel
