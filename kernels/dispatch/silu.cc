// silu: validation and dispatch.
#include "kernels/check.h"

namespace dt::kernels {

void silu_forward(const Tensor& x, Tensor& y) {
  const char* op = "silu_forward";
  require_float(op, {x, "x"});
  require_same_shape(op, {{x, "x"}, {y, "y"}});
  require_same_dtype(op, {{x, "x"}, {y, "y"}});
  require_same_device(op, {{x, "x"}, {y, "y"}});
  DT_BACKEND(x, silu_forward)(x, y);
}

void silu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  const char* op = "silu_backward";
  require_float(op, {x, "x"});
  require_same_shape(op, {{x, "x"}, {dy, "dy"}, {dx, "dx"}});
  require_same_dtype(op, {{x, "x"}, {dy, "dy"}, {dx, "dx"}});
  require_same_device(op, {{x, "x"}, {dy, "dy"}, {dx, "dx"}});
  DT_BACKEND(x, silu_backward)(x, dy, dx);
}

}  // namespace dt::kernels
