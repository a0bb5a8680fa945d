// DDP as a Strategy (parallel/strategy.h): every rank holds the whole model and optimizer,
// trains its slice of the global batch, and the gradients are all-reduced in buckets while
// the last micro-batch's backward still runs (parallel/grad_buckets.h).
#pragma once
#include <memory>

#include "parallel/grad_buckets.h"
#include "parallel/strategy.h"

namespace dt::parallel {

class DdpStrategy final : public Strategy {
 public:
  // dp: this rank's communicator over the dp axis; bucket_bytes >= 1.
  DdpStrategy(const ModelUnits& units, comm::Communicator& dp, int64_t bucket_bytes);
  std::string name() const override { return "ddp"; }
  comm::Communicator* batch_group() override { return batch_; }
  // The ranks the batch's rows split over when they are not the reduction's (context
  // parallelism sums over dp x cp, whose cp ranks share their rows): null for none.
  void split_rows_over(comm::Communicator* g) { batch_ = g; }
  void after_backward(int unit, Part part, bool last) override;
  void finish_grads() override { buckets_->finish(); }  // the sums, the same on every replica
  const GradBuckets& buckets() const { return *buckets_; }

 private:
  comm::Communicator& dp_;
  comm::Communicator* batch_ = &dp_;
  std::vector<nn::ParamList> units_;
  std::unique_ptr<GradBuckets> buckets_;
};

}  // namespace dt::parallel
