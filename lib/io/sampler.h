// Batches of examples for one data-parallel rank: [batch, context] i32 inputs and targets.
//
// Order: each epoch is a permutation of all examples, seeded by (seed, epoch) and the same
// on every rank (or the identity when shuffle is off). Split: rank r of `world` takes
// positions r, r + world, r + 2 * world, ... of that order.
// Not divisible: when size % world != 0, the last size % world positions of the epoch's
// order are dropped, so every rank sees exactly floor(size / world) examples per epoch and
// the ranks' collectives stay in lock step. With shuffling, a different tail is dropped each
// epoch, so no example is left out for good. Within a rank, a last partial batch is dropped
// too: batches_per_epoch = floor(floor(size / world) / batch).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "io/dataset.h"

namespace dt::io {

struct SamplerOptions {
  int64_t batch = 1;
  uint64_t seed = 0;
  bool shuffle = true;
  int rank = 0, world = 1;
};

// One per rank and thread: it caches the current epoch's order without locking.
class Sampler {
 public:
  Sampler(std::shared_ptr<const Dataset> data, const SamplerOptions& opt);

  int64_t batches_per_epoch() const { return per_rank_ / opt_.batch; }
  int64_t examples_per_rank() const { return per_rank_; }
  // This rank's example indices for `epoch`, in order (examples_per_rank of them).
  std::vector<int64_t> rank_indices(int64_t epoch) const;
  // Batch b of `epoch` into input and target: i32 [batch, context] CPU tensors.
  void batch(int64_t epoch, int64_t b, Tensor& input, Tensor& target) const;

  // A cursor for the training loop; (epoch, next batch) is the data position a checkpoint
  // saves, and seek() restores it.
  void next(Tensor& input, Tensor& target);
  int64_t epoch() const { return epoch_; }
  int64_t position() const { return pos_; }
  void seek(int64_t epoch, int64_t position);
  static constexpr int64_t kMaxEpoch = int64_t{1} << 62;  // the largest epoch seek accepts

 private:
  const std::vector<int64_t>& order(int64_t epoch) const;  // cached for the current epoch
  std::shared_ptr<const Dataset> data_;
  SamplerOptions opt_;
  int64_t per_rank_;
  int64_t epoch_ = 0, pos_ = 0;
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> cached_;
};

}  // namespace dt::io
