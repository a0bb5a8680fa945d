// softmax: validation and dispatch.
#include "kernels/check.h"

namespace dt::kernels {

void softmax_forward(const Tensor& x, Tensor& y) {
  const char* op = "softmax_forward";
  require_float(op, {x, "x"});
  require_same_shape(op, {{x, "x"}, {y, "y"}});
  require_same_dtype(op, {{x, "x"}, {y, "y"}});
  require_same_device(op, {{x, "x"}, {y, "y"}});
  DT_BACKEND(x, softmax_forward)(x, y);
}

void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  const char* op = "softmax_backward";
  require_float(op, {y, "y"});
  require_same_shape(op, {{y, "y"}, {dy, "dy"}, {dx, "dx"}});
  require_same_dtype(op, {{y, "y"}, {dy, "dy"}, {dx, "dx"}});
  require_same_device(op, {{y, "y"}, {dy, "dy"}, {dx, "dx"}});
  DT_BACKEND(y, softmax_backward)(y, dy, dx);
}

}  // namespace dt::kernels
