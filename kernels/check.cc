#include "kernels/check.h"

#include <cmath>

namespace dt::kernels {

static std::string where(const char* op, const Arg& a) { return std::string(op) + ": " + a.name; }

void require_defined(const char* op, Arg a) {
  DT_CHECK(a.t.defined(), where(op, a) + " is an empty tensor; a tensor with storage is required");
}

void require_float(const char* op, Arg a) {
  require_defined(op, a);
  DT_CHECK(is_floating(a.t.dtype()),
           where(op, a) + " has dtype " + dtype_name(a.t.dtype()) + "; accepted: f32, bf16, f16");
}

void require_dtype(const char* op, Arg a, DType dtype) {
  require_defined(op, a);
  DT_CHECK(a.t.dtype() == dtype,
           where(op, a) + " has dtype " + dtype_name(a.t.dtype()) + "; required: " + dtype_name(dtype));
}

void require_shape(const char* op, Arg a, const Shape& shape) {
  require_defined(op, a);
  DT_CHECK(a.t.shape() == shape, where(op, a) + " has shape " + shape_str(a.t.shape()) +
                                     "; required: " + shape_str(shape));
}

void require_min_ndim(const char* op, Arg a, int ndim) {
  require_defined(op, a);
  DT_CHECK(a.t.ndim() >= ndim, where(op, a) + " has " + std::to_string(a.t.ndim()) +
                                   " dims; required: at least " + std::to_string(ndim));
}

void require_row_stats(const char* op, Arg a, int64_t rows) {
  require_dtype(op, a, DType::F32);
  DT_CHECK(a.t.numel() == rows, where(op, a) + " has " + std::to_string(a.t.numel()) +
                                    " values; required: one per row of x, " + std::to_string(rows));
}

void require_eps(const char* op, float eps) {
  DT_CHECK(std::isfinite(eps) && eps >= 0.0f,
           std::string(op) + ": eps is " + std::to_string(eps) + "; accepted: a finite value >= 0");
}

void require_same_shape(const char* op, std::initializer_list<Arg> args) {
  const Arg& first = *args.begin();
  for (const Arg& a : args) {
    require_defined(op, a);
    DT_CHECK(a.t.shape() == first.t.shape(), where(op, a) + " has shape " + shape_str(a.t.shape()) +
                                                 "; required: the shape of " + first.name + ", " +
                                                 shape_str(first.t.shape()));
  }
}

void require_same_dtype(const char* op, std::initializer_list<Arg> args) {
  const Arg& first = *args.begin();
  for (const Arg& a : args) {
    require_defined(op, a);
    DT_CHECK(a.t.dtype() == first.t.dtype(), where(op, a) + " has dtype " + dtype_name(a.t.dtype()) +
                                                 "; required: the dtype of " + first.name + ", " +
                                                 dtype_name(first.t.dtype()));
  }
}

void require_same_device(const char* op, std::initializer_list<Arg> args) {
  const Arg& first = *args.begin();
  for (const Arg& a : args) {
    require_defined(op, a);
    DT_CHECK(a.t.device() == first.t.device(), where(op, a) + " is on " + a.t.device().str() +
                                                   "; required: the device of " + first.name + ", " +
                                                   first.t.device().str());
  }
}

}  // namespace dt::kernels
