#include "parallel/ddp_strategy.h"

namespace dt::parallel {

DdpStrategy::DdpStrategy(const ModelUnits& units, comm::Communicator& dp, int64_t bucket_bytes)
    : dp_(dp), units_(units.params) {
  // Buckets fill in the order backward finishes the units: block n-1, ..., block 0, then
  // unit 0 (embeddings, final norm, head), whose last backward part is the embedding's.
  std::vector<nn::ParamList> order(units_.rbegin(), units_.rend() - 1);
  order.push_back(units_[0]);
  buckets_ = std::make_unique<GradBuckets>(order, dp, bucket_bytes);
}

void DdpStrategy::after_backward(int unit, Part part, bool last) {
  // Gradients accumulate locally over the micro-batches; only the last one's are reduced.
  if (last && grads_final(part)) buckets_->mark_ready(units_[static_cast<size_t>(unit)]);
}

}  // namespace dt::parallel
