// embedding: validation and dispatch. ids may have any shape S (e.g. [R] or [B, T]); out and
// dout are then S + [C]. Whether each id is below V is data, checked by the backend (a
// negative id is "no row", see ops.h).
#include "kernels/check.h"

namespace dt::kernels {
namespace {

void require_table(const char* op, Arg a) {
  require_float(op, a);
  DT_CHECK(a.t.ndim() == 2, std::string(op) + ": " + a.name + " has shape " + shape_str(a.t.shape()) +
                                "; required: 2 dims, [V, C]");
}

Shape rows_of(const Tensor& ids, int64_t c) {
  Shape s = ids.shape();
  s.push_back(c);
  return s;
}

}  // namespace

void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out) {
  const char* op = "embedding_forward";
  require_dtype(op, {ids, "ids"}, DType::I32);
  require_table(op, {table, "table"});
  require_shape(op, {out, "out"}, rows_of(ids, table.dim(1)));
  require_same_dtype(op, {{table, "table"}, {out, "out"}});
  require_same_device(op, {{table, "table"}, {ids, "ids"}, {out, "out"}});
  DT_BACKEND(table, embedding_forward)(ids, table, out);
}

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable) {
  const char* op = "embedding_backward";
  require_dtype(op, {ids, "ids"}, DType::I32);
  require_table(op, {dtable, "dtable"});
  require_shape(op, {dout, "dout"}, rows_of(ids, dtable.dim(1)));
  require_same_dtype(op, {{dtable, "dtable"}, {dout, "dout"}});
  require_same_device(op, {{dtable, "dtable"}, {ids, "ids"}, {dout, "dout"}});
  DT_BACKEND(dtable, embedding_backward)(ids, dout, dtable);
}

}  // namespace dt::kernels
