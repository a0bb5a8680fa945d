// Learning-rate schedules: a pure function of the step, so a resumed run (which restores
// only the step count) continues on exactly the same curve.
#pragma once
#include <cstdint>

namespace dt::optim {

struct LrSchedule {
  enum class Kind { Constant, WarmupCosine };
  Kind kind = Kind::Constant;
  float base_lr = 1e-3f;
  int64_t warmup_steps = 0;  // WarmupCosine: linear ramp over these steps
  int64_t total_steps = 0;   // WarmupCosine: the cosine ends here, then stays at the floor
  float min_ratio = 0.1f;    // WarmupCosine: floor = base_lr * min_ratio

  static LrSchedule constant(float lr);
  static LrSchedule warmup_cosine(float lr, int64_t warmup_steps, int64_t total_steps, float min_ratio);

  // The lr of update number `step` (0-based: the first update is step 0).
  //  - warmup (step < warmup_steps): base * (step + 1) / warmup_steps, so the first update
  //    already moves and the last warmup step reaches base exactly;
  //  - decay: base * (r + (1 - r) * (1 + cos(pi * t)) / 2), t = (step - warmup) /
  //    (total - warmup) clamped to [0, 1]; so step == warmup is base, step >= total is base * r.
  float lr(int64_t step) const;
};

}  // namespace dt::optim
