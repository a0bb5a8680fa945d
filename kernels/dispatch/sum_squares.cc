// sum_squares: validation and dispatch.
#include "kernels/check.h"

namespace dt::kernels {

double sum_squares(const Tensor& x) {
  require_float("sum_squares", {x, "x"});
  return DT_BACKEND(x, sum_squares)(x);
}

}  // namespace dt::kernels
