// Argument checks shared by the op dispatchers. Each throws INVALID_ARGUMENT with a
// message "<op>: <argument> ..." naming what was expected.
#pragma once
#include <initializer_list>
#include <string>

#include "core/error.h"
#include "core/tensor.h"
#include "kernels/ops.h"

namespace dt::kernels {

struct Arg {
  const Tensor& t;
  const char* name;
};

void require_defined(const char* op, Arg a);
void require_float(const char* op, Arg a);
void require_dtype(const char* op, Arg a, DType dtype);
void require_shape(const char* op, Arg a, const Shape& shape);
void require_min_ndim(const char* op, Arg a, int ndim);
// Every argument has the first one's shape / dtype / device.
void require_same_shape(const char* op, std::initializer_list<Arg> args);
void require_same_dtype(const char* op, std::initializer_list<Arg> args);
void require_same_device(const char* op, std::initializer_list<Arg> args);

// The backend entry `field` of the table for `t`'s device, or UNSUPPORTED when missing.
#define DT_BACKEND(t, field) (::dt::kernels::backend_entry((t), #field, &OpTable::field))

template <class F>
F backend_entry(const Tensor& t, const char* name, F OpTable::*field) {
  const OpTable& table = op_table(t.device());
  F f = table.*field;
  if (!f) fail(DT_ERR_UNSUPPORTED, std::string("op ") + name + " has no kernel on " + table.device_name);
  return f;
}

}  // namespace dt::kernels
