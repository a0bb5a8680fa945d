#include "optim/clip.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "kernels/ops.h"

namespace dt::optim {

double global_grad_norm(const nn::ParamList& params, const SquaredSumReducer& reduce_sq) {
  double sq = 0.0;
  for (size_t i = 0; i < params.size(); ++i) {
    DT_CHECK(params[i] != nullptr && params[i]->grad.defined(),
             "global_grad_norm: parameter " + std::to_string(i) + " is null or has no grad");
    sq += kernels::sum_squares(params[i]->grad);
  }
  if (reduce_sq) reduce_sq(sq);
  return std::sqrt(sq);
}

float clip_coefficient(double norm, double max_norm) {
  DT_CHECK(std::isfinite(max_norm) && max_norm > 0,
           "clip: max_norm is " + std::to_string(max_norm) + "; accepted: a finite number > 0");
  if (!std::isfinite(norm) || norm <= max_norm) return 1.0f;
  return static_cast<float>(max_norm / norm);
}

double clip_grad_norm(const nn::ParamList& params, double max_norm, const SquaredSumReducer& reduce_sq) {
  double norm = global_grad_norm(params, reduce_sq);
  float c = clip_coefficient(norm, max_norm);
  if (c < 1.0f)
    for (nn::Parameter* p : params) kernels::scale(p->grad, c);
  return norm;
}

}  // namespace dt::optim
