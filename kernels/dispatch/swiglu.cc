// swiglu: validation and dispatch.
#include "kernels/check.h"

namespace dt::kernels {

void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& y) {
  const char* op = "swiglu_forward";
  require_float(op, {gate, "gate"});
  require_same_shape(op, {{gate, "gate"}, {up, "up"}, {y, "y"}});
  require_same_dtype(op, {{gate, "gate"}, {up, "up"}, {y, "y"}});
  require_same_device(op, {{gate, "gate"}, {up, "up"}, {y, "y"}});
  DT_BACKEND(gate, swiglu_forward)(gate, up, y);
}

void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy, Tensor& dgate, Tensor& dup) {
  const char* op = "swiglu_backward";
  require_float(op, {gate, "gate"});
  require_same_shape(op, {{gate, "gate"}, {up, "up"}, {dy, "dy"}, {dgate, "dgate"}, {dup, "dup"}});
  require_same_dtype(op, {{gate, "gate"}, {up, "up"}, {dy, "dy"}, {dgate, "dgate"}, {dup, "dup"}});
  require_same_device(op, {{gate, "gate"}, {up, "up"}, {dy, "dy"}, {dgate, "dgate"}, {dup, "dup"}});
  DT_BACKEND(gate, swiglu_backward)(gate, up, dy, dgate, dup);
}

}  // namespace dt::kernels
