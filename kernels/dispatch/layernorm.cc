// layernorm: validation and dispatch.
#include "kernels/check.h"

namespace dt::kernels {

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y,
                       Tensor& mean, Tensor& rstd) {
  const char* op = "layernorm_forward";
  require_float(op, {x, "x"});
  require_min_ndim(op, {x, "x"}, 1);
  require_shape(op, {weight, "weight"}, {x.cols()});
  if (bias.defined()) require_shape(op, {bias, "bias"}, {x.cols()});
  require_same_shape(op, {{x, "x"}, {y, "y"}});
  require_same_dtype(op, {{x, "x"}, {weight, "weight"}, {y, "y"}});
  if (bias.defined()) require_same_dtype(op, {{x, "x"}, {bias, "bias"}});
  require_row_stats(op, {mean, "mean"}, x.rows());
  require_row_stats(op, {rstd, "rstd"}, x.rows());
  require_eps(op, eps);
  require_same_device(op, {{x, "x"}, {weight, "weight"}, {y, "y"}, {mean, "mean"}, {rstd, "rstd"}});
  if (bias.defined()) require_same_device(op, {{x, "x"}, {bias, "bias"}});
  DT_BACKEND(x, layernorm_forward)(x, weight, bias, eps, y, mean, rstd);
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor& dx, Tensor& dweight, Tensor& dbias) {
  const char* op = "layernorm_backward";
  require_float(op, {x, "x"});
  require_min_ndim(op, {x, "x"}, 1);
  require_same_shape(op, {{x, "x"}, {dy, "dy"}, {dx, "dx"}});
  require_shape(op, {weight, "weight"}, {x.cols()});
  require_shape(op, {dweight, "dweight"}, {x.cols()});
  if (dbias.defined()) require_shape(op, {dbias, "dbias"}, {x.cols()});
  require_same_dtype(op, {{x, "x"}, {dy, "dy"}, {weight, "weight"}, {dx, "dx"}, {dweight, "dweight"}});
  if (dbias.defined()) require_same_dtype(op, {{x, "x"}, {dbias, "dbias"}});
  require_row_stats(op, {mean, "mean"}, x.rows());
  require_row_stats(op, {rstd, "rstd"}, x.rows());
  require_same_device(op, {{x, "x"}, {dy, "dy"}, {weight, "weight"}, {mean, "mean"}, {rstd, "rstd"}, {dx, "dx"},
                           {dweight, "dweight"}});
  if (dbias.defined()) require_same_device(op, {{x, "x"}, {dbias, "dbias"}});
  DT_BACKEND(x, layernorm_backward)(dy, x, weight, mean, rstd, dx, dweight, dbias);
}

}  // namespace dt::kernels
