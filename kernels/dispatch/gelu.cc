// gelu: validation and dispatch.
#include "kernels/check.h"

namespace dt::kernels {

void gelu_forward(const Tensor& x, Tensor& y) {
  const char* op = "gelu_forward";
  require_float(op, {x, "x"});
  require_same_shape(op, {{x, "x"}, {y, "y"}});
  require_same_dtype(op, {{x, "x"}, {y, "y"}});
  require_same_device(op, {{x, "x"}, {y, "y"}});
  DT_BACKEND(x, gelu_forward)(x, y);
}

void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  const char* op = "gelu_backward";
  require_float(op, {x, "x"});
  require_same_shape(op, {{x, "x"}, {dy, "dy"}, {dx, "dx"}});
  require_same_dtype(op, {{x, "x"}, {dy, "dy"}, {dx, "dx"}});
  require_same_device(op, {{x, "x"}, {dy, "dy"}, {dx, "dx"}});
  DT_BACKEND(x, gelu_backward)(x, dy, dx);
}

void bias_gelu_forward(const Tensor& x, const Tensor& bias, Tensor& y) {
  if (!bias.defined()) return gelu_forward(x, y);
  const char* op = "bias_gelu_forward";
  require_float(op, {x, "x"});
  require_min_ndim(op, {x, "x"}, 1);
  require_shape(op, {bias, "bias"}, {x.cols()});
  require_same_shape(op, {{x, "x"}, {y, "y"}});
  require_same_dtype(op, {{x, "x"}, {bias, "bias"}, {y, "y"}});
  require_same_device(op, {{x, "x"}, {bias, "bias"}, {y, "y"}});
  DT_BACKEND(x, bias_gelu_forward)(x, bias, y);
}

void bias_gelu_backward(const Tensor& x, const Tensor& bias, const Tensor& dy, Tensor& dx, Tensor& dbias) {
  const char* op = "bias_gelu_backward";
  if (!bias.defined()) {
    if (dbias.defined()) fail(DT_ERR_INVALID_ARGUMENT, std::string(op) + ": dbias is given but bias is not");
    return gelu_backward(x, dy, dx);
  }
  require_float(op, {x, "x"});
  require_min_ndim(op, {x, "x"}, 1);
  require_shape(op, {bias, "bias"}, {x.cols()});
  require_shape(op, {dbias, "dbias"}, {x.cols()});
  require_same_shape(op, {{x, "x"}, {dy, "dy"}, {dx, "dx"}});
  require_same_dtype(op, {{x, "x"}, {bias, "bias"}, {dy, "dy"}, {dx, "dx"}, {dbias, "dbias"}});
  require_same_device(op, {{x, "x"}, {bias, "bias"}, {dy, "dy"}, {dx, "dx"}, {dbias, "dbias"}});
  DT_BACKEND(x, bias_gelu_backward)(x, bias, dy, dx, dbias);
}

}  // namespace dt::kernels
