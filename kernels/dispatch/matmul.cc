// matmul: validation and dispatch.
#include "kernels/check.h"

namespace dt::kernels {

void matmul(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha, float beta) {
  const char* op = "matmul";
  require_float(op, {a, "a"});
  require_same_dtype(op, {{a, "a"}, {b, "b"}, {c, "c"}});
  require_same_device(op, {{a, "a"}, {b, "b"}, {c, "c"}});
  require_min_ndim(op, {a, "a"}, 2);
  require_min_ndim(op, {b, "b"}, 2);
  DT_CHECK(a.ndim() == c.ndim(), "matmul: c has " + std::to_string(c.ndim()) + " dims; required: " +
                                     std::to_string(a.ndim()) + ", as a");
  DT_CHECK(b.ndim() == 2 || b.ndim() == a.ndim(),
           "matmul: b has " + std::to_string(b.ndim()) + " dims; accepted: 2 (shared) or " + std::to_string(a.ndim()));
  int64_t m = trans_a ? a.dim(-1) : a.dim(-2), k = trans_a ? a.dim(-2) : a.dim(-1);
  int64_t kb = trans_b ? b.dim(-1) : b.dim(-2), n = trans_b ? b.dim(-2) : b.dim(-1);
  DT_CHECK(k == kb, "matmul: inner dims differ: op(a) " + shape_str({m, k}) + " and op(b) " + shape_str({kb, n}));
  Shape want = a.shape();
  want[want.size() - 2] = m;
  want[want.size() - 1] = n;
  require_shape(op, {c, "c"}, want);
  if (b.ndim() > 2)
    for (int i = 0; i < a.ndim() - 2; ++i)
      DT_CHECK(a.dim(i) == b.dim(i), "matmul: batch dims of a " + shape_str(a.shape()) + " and b " +
                                         shape_str(b.shape()) + " differ");
  DT_BACKEND(a, matmul)(a, b, c, trans_a, trans_b, alpha, beta);
}

}  // namespace dt::kernels
