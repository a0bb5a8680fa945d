#include "io/sampler.h"

#include <numeric>
#include <string>

#include "core/error.h"
#include "core/rng.h"

namespace dt::io {

Sampler::Sampler(std::shared_ptr<const Dataset> data, const SamplerOptions& opt) : data_(std::move(data)), opt_(opt) {
  DT_CHECK(data_ != nullptr, "Sampler: dataset is null");
  DT_CHECK(opt.world >= 1 && opt.rank >= 0 && opt.rank < opt.world,
           "Sampler: rank " + std::to_string(opt.rank) + " of world " + std::to_string(opt.world) +
               "; accepted: world >= 1, 0 <= rank < world");
  DT_CHECK(opt.batch >= 1, "Sampler: batch is " + std::to_string(opt.batch) + "; accepted: >= 1");
  per_rank_ = data_->size() / opt.world;
  DT_CHECK(per_rank_ / opt.batch >= 1, "Sampler: " + std::to_string(data_->size()) + " examples over " +
                                           std::to_string(opt.world) + " ranks do not fill one batch of " +
                                           std::to_string(opt.batch));
}

const std::vector<int64_t>& Sampler::order(int64_t epoch) const {
  if (cached_epoch_ == epoch) return cached_;
  int64_t n = data_->size();
  cached_.resize(static_cast<size_t>(n));
  std::iota(cached_.begin(), cached_.end(), int64_t(0));
  if (opt_.shuffle) {
    // Fisher-Yates driven by the counter RNG: the permutation depends on (seed, epoch) only.
    CounterRng rng(opt_.seed, "io.sampler.epoch." + std::to_string(epoch));
    for (int64_t i = n - 1; i > 0; --i) {
      uint64_t u = uint64_t(rng.bits(2 * uint64_t(i))) << 32 | rng.bits(2 * uint64_t(i) + 1);
      std::swap(cached_[static_cast<size_t>(i)], cached_[static_cast<size_t>(u % uint64_t(i + 1))]);
    }
  }
  cached_epoch_ = epoch;
  return cached_;
}

std::vector<int64_t> Sampler::rank_indices(int64_t epoch) const {
  DT_CHECK(epoch >= 0, "Sampler: epoch is " + std::to_string(epoch) + "; accepted: >= 0");
  const std::vector<int64_t>& all = order(epoch);
  std::vector<int64_t> mine(static_cast<size_t>(per_rank_));
  for (int64_t k = 0; k < per_rank_; ++k) mine[static_cast<size_t>(k)] = all[static_cast<size_t>(k * opt_.world + opt_.rank)];
  return mine;
}

void Sampler::batch(int64_t epoch, int64_t b, Tensor& input, Tensor& target) const {
  DT_CHECK(b >= 0 && b < batches_per_epoch(), "Sampler: batch " + std::to_string(b) + "; accepted: [0, " +
                                                  std::to_string(batches_per_epoch()) + ")");
  int64_t t = data_->context();
  Shape want = {opt_.batch, t};
  for (Tensor* x : {&input, &target}) {
    if (!x->defined()) *x = Tensor::zeros(want, DType::I32, Device::cpu(), MemTag::Activation);
    DT_CHECK(x->shape() == want && x->dtype() == DType::I32 && x->device().type == Device::cpu().type,
             "Sampler: input and target must be i32 CPU tensors shaped " + shape_str(want));
  }
  DT_CHECK(epoch >= 0, "Sampler: epoch is " + std::to_string(epoch) + "; accepted: >= 0");
  const std::vector<int64_t>& all = order(epoch);
  for (int64_t r = 0; r < opt_.batch; ++r) {
    int64_t k = b * opt_.batch + r;
    int64_t idx = all[static_cast<size_t>(k * opt_.world + opt_.rank)];
    data_->get(idx, input.data<int32_t>() + r * t, target.data<int32_t>() + r * t);
  }
}

void Sampler::next(Tensor& input, Tensor& target) {
  batch(epoch_, pos_, input, target);
  if (++pos_ == batches_per_epoch()) ++epoch_, pos_ = 0;
}

void Sampler::seek(int64_t epoch, int64_t position) {
  // Epochs stop at 2^62 so that counting on from any accepted one cannot overflow.
  DT_CHECK(epoch >= 0 && epoch <= kMaxEpoch && position >= 0 && position < batches_per_epoch(),
           "Sampler::seek: (epoch " + std::to_string(epoch) + ", position " + std::to_string(position) +
               "); accepted: epoch 0 to 2^62, position in [0, " + std::to_string(batches_per_epoch()) + ")");
  epoch_ = epoch, pos_ = position;
}

}  // namespace dt::io
