// rmsnorm: validation and dispatch.
#include "kernels/check.h"

namespace dt::kernels {

void rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor& rstd) {
  const char* op = "rmsnorm_forward";
  require_float(op, {x, "x"});
  require_min_ndim(op, {x, "x"}, 1);
  require_shape(op, {weight, "weight"}, {x.cols()});
  require_same_shape(op, {{x, "x"}, {y, "y"}});
  require_same_dtype(op, {{x, "x"}, {weight, "weight"}, {y, "y"}});
  require_row_stats(op, {rstd, "rstd"}, x.rows());
  require_eps(op, eps);
  require_same_device(op, {{x, "x"}, {weight, "weight"}, {y, "y"}, {rstd, "rstd"}});
  DT_BACKEND(x, rmsnorm_forward)(x, weight, eps, y, rstd);
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                      Tensor& dweight) {
  const char* op = "rmsnorm_backward";
  require_float(op, {x, "x"});
  require_min_ndim(op, {x, "x"}, 1);
  require_same_shape(op, {{x, "x"}, {dy, "dy"}, {dx, "dx"}});
  require_shape(op, {weight, "weight"}, {x.cols()});
  require_shape(op, {dweight, "dweight"}, {x.cols()});
  require_same_dtype(op, {{x, "x"}, {dy, "dy"}, {weight, "weight"}, {dx, "dx"}, {dweight, "dweight"}});
  require_row_stats(op, {rstd, "rstd"}, x.rows());
  require_same_device(op, {{x, "x"}, {dy, "dy"}, {weight, "weight"}, {rstd, "rstd"}, {dx, "dx"}, {dweight, "dweight"}});
  DT_BACKEND(x, rmsnorm_backward)(dy, x, weight, rstd, dx, dweight);
}

}  // namespace dt::kernels
