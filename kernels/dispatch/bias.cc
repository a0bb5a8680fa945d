// bias_add, bias_backward: validation and dispatch.
#include "kernels/check.h"

namespace dt::kernels {

void bias_add(Tensor& y, const Tensor& bias) {
  const char* op = "bias_add";
  require_float(op, {y, "y"});
  require_min_ndim(op, {y, "y"}, 1);
  require_shape(op, {bias, "bias"}, {y.cols()});
  require_same_dtype(op, {{y, "y"}, {bias, "bias"}});
  require_same_device(op, {{y, "y"}, {bias, "bias"}});
  DT_BACKEND(y, bias_add)(y, bias);
}

void bias_backward(const Tensor& dy, Tensor& dbias) {
  const char* op = "bias_backward";
  require_float(op, {dy, "dy"});
  require_min_ndim(op, {dy, "dy"}, 1);
  require_shape(op, {dbias, "dbias"}, {dy.cols()});
  require_same_dtype(op, {{dy, "dy"}, {dbias, "dbias"}});
  require_same_device(op, {{dy, "dy"}, {dbias, "dbias"}});
  DT_BACKEND(dy, bias_backward)(dy, dbias);
}

}  // namespace dt::kernels
