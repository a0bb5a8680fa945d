// DDP's gradient reduction: gradients grouped into buckets and all-reduced while backward
// still runs (as PyTorch DDP's reducer does).
//
// Buckets follow the order in which backward finishes gradients: DdpStrategy announces
// groups (block n-1, ..., block 0, then embeddings, final norm and head), and buckets are
// filled from those groups in that order, closing one when it reaches `bucket_bytes` (a
// parameter is never split) or when the dtype changes. When every parameter of a bucket has
// been announced, its gradients are copied into the bucket's flat buffer (MemTag::CommBuffer)
// and one asynchronous all-reduce (sum) starts on the dp communicator; backward goes on.
// finish() waits for every bucket in order and copies the sums back into the gradients.
//
// Every rank builds the same buckets from the same model and launches them in the same
// order, so the collectives match (SPMD). The sum is the global gradient when each rank's
// backward was scaled by its share of the global batch (the engine does that).
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "comm/communicator.h"
#include "nn/parameter.h"

namespace dt::parallel {

class GradBuckets {
 public:
  // ready_order: the groups the engine announces, in order; they must cover every
  // parameter once. bucket_bytes >= 1.
  GradBuckets(const std::vector<nn::ParamList>& ready_order, comm::Communicator& comm, int64_t bucket_bytes);
  // Waits for every all-reduce still in flight (after an exception mid-backward): a
  // bucket's buffer must outlive the collective that writes it. Errors are not rethrown
  // (the step that issued the work reports them).
  ~GradBuckets();
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  // From the grad-ready hook: these parameters' gradients are final for this step.
  void mark_ready(const nn::ParamList& ready);
  // Launches what was not announced, waits for every bucket, writes the sums back, and
  // resets for the next step. Rethrows a collective's error (timeout, abort).
  void finish();

  int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }
  int64_t total_bytes() const { return total_bytes_; }
  // Of the last step: buckets whose all-reduce started before finish() (during backward).
  int64_t launched_early() const { return launched_early_; }
  // Of the last step: seconds finish() spent waiting for all-reduces, the communication
  // that backward did not hide.
  double exposed_seconds() const { return exposed_s_; }

 private:
  struct Bucket {
    std::vector<nn::Parameter*> params;
    std::vector<int64_t> offsets;  // element offset of each parameter in flat
    Tensor flat;
    size_t waiting = 0;            // parameters not yet announced this step
    comm::WorkPtr work;
    double launched_us = -1.0;  // trace: when its all-reduce started (-1: not traced yet)
  };
  void trace_done(Bucket& b, size_t index);  // records the bucket's comm span once
  void launch(Bucket& b);

  comm::Communicator& comm_;
  std::vector<Bucket> buckets_;
  std::map<const nn::Parameter*, size_t> bucket_of_;
  int64_t total_bytes_ = 0, launched_early_ = 0, launched_ = 0;
  double exposed_s_ = 0.0;
};

}  // namespace dt::parallel
