#include "optim/schedule.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace dt::optim {

LrSchedule LrSchedule::constant(float lr) {
  DT_CHECK(std::isfinite(lr) && lr >= 0, "LrSchedule: lr is " + std::to_string(lr) + "; accepted: finite, >= 0");
  LrSchedule s;
  s.base_lr = lr;
  return s;
}

LrSchedule LrSchedule::warmup_cosine(float lr, int64_t warmup_steps, int64_t total_steps, float min_ratio) {
  DT_CHECK(std::isfinite(lr) && lr >= 0, "LrSchedule: lr is " + std::to_string(lr) + "; accepted: finite, >= 0");
  DT_CHECK(warmup_steps >= 0 && total_steps >= warmup_steps,
           "LrSchedule: warmup_steps " + std::to_string(warmup_steps) + ", total_steps " +
               std::to_string(total_steps) + "; accepted: 0 <= warmup_steps <= total_steps");
  DT_CHECK(min_ratio >= 0 && min_ratio <= 1,
           "LrSchedule: min_ratio is " + std::to_string(min_ratio) + "; accepted: [0, 1]");
  LrSchedule s;
  s.kind = Kind::WarmupCosine;
  s.base_lr = lr, s.warmup_steps = warmup_steps, s.total_steps = total_steps, s.min_ratio = min_ratio;
  return s;
}

float LrSchedule::lr(int64_t step) const {
  DT_CHECK(step >= 0, "LrSchedule: step is " + std::to_string(step) + "; accepted: >= 0");
  if (kind == Kind::Constant) return base_lr;
  // Computed in double and rounded once, so the curve's known points are exact in f32.
  double base = base_lr;
  if (step < warmup_steps) return static_cast<float>(base * double(step + 1) / double(warmup_steps));
  int64_t span = total_steps - warmup_steps;
  double t = span > 0 ? std::min(1.0, double(step - warmup_steps) / double(span)) : 1.0;
  const double kPi = 3.14159265358979323846;
  double r = min_ratio;
  return static_cast<float>(base * (r + (1.0 - r) * 0.5 * (1.0 + std::cos(kPi * t))));
}

}  // namespace dt::optim
