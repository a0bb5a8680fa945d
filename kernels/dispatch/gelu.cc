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

}  // namespace dt::kernels
