// fill, scale, add: validation and dispatch.
#include "kernels/check.h"

namespace dt::kernels {

void fill(Tensor& x, float value) {
  const char* op = "fill";
  require_float(op, {x, "x"});
  DT_BACKEND(x, fill)(x, value);
}

void scale(Tensor& x, float alpha) {
  const char* op = "scale";
  require_float(op, {x, "x"});
  DT_BACKEND(x, scale)(x, alpha);
}

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  const char* op = "add";
  require_float(op, {a, "a"});
  require_same_shape(op, {{a, "a"}, {b, "b"}, {out, "out"}});
  require_same_dtype(op, {{a, "a"}, {b, "b"}, {out, "out"}});
  require_same_device(op, {{a, "a"}, {b, "b"}, {out, "out"}});
  DT_BACKEND(a, add)(a, b, out);
}

}  // namespace dt::kernels
