// Argument checks shared by the op dispatchers. Each throws INVALID_ARGUMENT with a
// message "<op>: <argument> ..." naming what was expected.
#pragma once
#include <initializer_list>
#include <string>
#include <utility>

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
// Per-row statistics of a norm (mean, rstd): f32, one value per row of x, in any shape
// holding `rows` values (e.g. [R] or [B, T]).
void require_row_stats(const char* op, Arg a, int64_t rows);
// A norm's epsilon: finite and >= 0.
void require_eps(const char* op, float eps);
// Every argument has the first one's shape / dtype / device.
void require_same_shape(const char* op, std::initializer_list<Arg> args);
void require_same_dtype(const char* op, std::initializer_list<Arg> args);
void require_same_device(const char* op, std::initializer_list<Arg> args);

// The backend entry `field` of the table for `t`'s device, or UNSUPPORTED when missing.
// Returned wrapped in a BackendCall, which times the call when op profiling is on (ops.h).
#define DT_BACKEND(t, field) (::dt::kernels::backend_entry((t), #field, &OpTable::field))

template <class R, class... A>
struct BackendCall {
  R (*f)(A...);
  const char* name;
  template <class... P>
  R operator()(P&&... p) const {
    if (!detail::g_op_profiling) return f(std::forward<P>(p)...);  // the one branch when off
    detail::OpTimer timer(name);
    return f(std::forward<P>(p)...);
  }
};

template <class R, class... A>
BackendCall<R, A...> backend_entry(const Tensor& t, const char* name, R (*OpTable::*field)(A...)) {
  const OpTable& table = op_table(t.device());
  R (*f)(A...) = table.*field;
  if (!f) fail(DT_ERR_UNSUPPORTED, std::string("op ") + name + " has no kernel on " + table.device_name);
  return {f, name};
}

}  // namespace dt::kernels
