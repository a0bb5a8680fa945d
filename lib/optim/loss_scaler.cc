#include "optim/loss_scaler.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace dt::optim {

DynamicLossScaler::DynamicLossScaler(const LossScalerOptions& opt) : opt_(opt), scale_(opt.init_scale) {
  auto pos = [](float x) { return std::isfinite(x) && x > 0; };
  DT_CHECK(pos(opt.init_scale), "DynamicLossScaler: init_scale is " + std::to_string(opt.init_scale) +
                                    "; accepted: a finite number > 0");
  DT_CHECK(pos(opt.growth_factor) && opt.growth_factor >= 1,
           "DynamicLossScaler: growth_factor is " + std::to_string(opt.growth_factor) + "; accepted: >= 1");
  DT_CHECK(pos(opt.backoff_factor) && opt.backoff_factor < 1,
           "DynamicLossScaler: backoff_factor is " + std::to_string(opt.backoff_factor) + "; accepted: (0, 1)");
  DT_CHECK(opt.growth_interval >= 1, "DynamicLossScaler: growth_interval is " +
                                         std::to_string(opt.growth_interval) + "; accepted: >= 1");
  DT_CHECK(pos(opt.min_scale) && opt.min_scale <= opt.init_scale,
           "DynamicLossScaler: min_scale is " + std::to_string(opt.min_scale) + "; accepted: (0, init_scale]");
}

DynamicLossScaler::Decision DynamicLossScaler::update(bool found_inf) {
  Decision d{found_inf, 1.0f / scale_};
  if (!found_inf) {
    if (++good_steps_ >= opt_.growth_interval) {
      float grown = scale_ * opt_.growth_factor;
      if (std::isfinite(grown)) scale_ = grown;  // never grow into Inf (f32 max is ~2^128)
      good_steps_ = 0;
    }
    return d;
  }
  ++skipped_steps_;
  good_steps_ = 0;
  float next = scale_ * opt_.backoff_factor;
  // Status choice: overflow at a scale this small means the gradients are non-finite
  // for reasons scaling cannot fix (a diverged run: lr too high, bad data or init). That is
  // not a libdtrain bug (INTERNAL), not a cancellation (ABORTED), and not something this
  // build cannot do (UNSUPPORTED); of the existing codes INVALID_ARGUMENT is the honest
  // one: the run's configuration and inputs, which the caller chose, produce it. The
  // message says what happened and what to change.
  if (next < opt_.min_scale)
    fail(DT_ERR_INVALID_ARGUMENT,
         "DynamicLossScaler: gradients are still Inf/NaN at loss scale " + std::to_string(scale_) +
             "; backing off would go below min_scale " + std::to_string(opt_.min_scale) + " after " +
             std::to_string(skipped_steps_) +
             " skipped steps: the run is diverging (lower the lr, check the data, or use bf16)");
  scale_ = next;
  return d;
}

void DynamicLossScaler::restore(float scale, int64_t good_steps) {
  DT_CHECK(std::isfinite(scale) && scale >= opt_.min_scale,
           "DynamicLossScaler::restore: scale is " + std::to_string(scale) + "; accepted: finite, >= min_scale");
  DT_CHECK(good_steps >= 0 && good_steps < opt_.growth_interval,
           "DynamicLossScaler::restore: good_steps is " + std::to_string(good_steps) +
               "; accepted: [0, growth_interval)");
  scale_ = scale, good_steps_ = good_steps;
}

}  // namespace dt::optim
