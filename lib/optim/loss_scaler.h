// Dynamic loss scaling for f16 training (as torch.cuda.amp.GradScaler): the loss is
// multiplied by scale() before backward so small f16 gradients do not flush to zero; the
// optimizer step divides it back out (grad_scale = unscale). When any gradient overflowed
// (Inf/NaN), the step is skipped and the scale backs off; after `growth_interval` good
// steps in a row it grows, probing for the largest scale that does not overflow.
//
// Use, once per optimizer step:
//   double norm = global_grad_norm(params, reduce);   // of the SCALED grads; Inf/NaN on overflow
//   auto d = scaler.update(!std::isfinite(norm));
//   if (!d.skip) opt.step(d.unscale * clip_coefficient(norm * d.unscale, max_norm));
//   opt.zero_grad();
// (one pass over the grads for both the overflow check and clipping: the true norm is the
// scaled norm times unscale, and both factors fold into the step's grad_scale).
#pragma once
#include <cstdint>

namespace dt::optim {

struct LossScalerOptions {
  float init_scale = 65536.0f;  // 2^16
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int64_t growth_interval = 2000;
  // Below this the run is diverging, not overflowing: update() throws instead of
  // halving forever while silently skipping every step.
  float min_scale = 1.0f;
};

class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(const LossScalerOptions& opt = {});

  float scale() const { return scale_; }
  struct Decision {
    bool skip;      // grads overflowed: do not step
    float unscale;  // 1 / the scale the grads were computed with: the step's grad_scale
  };
  // Records one step's outcome and moves the scale. Throws when a back-off would take the
  // scale below min_scale.
  Decision update(bool found_inf);

  int64_t good_steps() const { return good_steps_; }        // since the last change
  int64_t skipped_steps() const { return skipped_steps_; }  // over the whole run
  // For checkpoints: the whole state is (scale, good_steps).
  void restore(float scale, int64_t good_steps);

 private:
  LossScalerOptions opt_;
  float scale_;
  int64_t good_steps_ = 0, skipped_steps_ = 0;
};

}  // namespace dt::optim
