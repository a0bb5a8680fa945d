// Mixture of experts (routing, dispatch, combine): validation and dispatch. Whether each
// slot is below S is data, checked by the backend before it writes (as embedding's ids).
#include <cmath>

#include "kernels/check.h"

namespace dt::kernels {
namespace {

void require_matrix(const char* op, Arg a) {
  DT_CHECK(a.t.ndim() == 2, std::string(op) + ": " + a.name + " has shape " + shape_str(a.t.shape()) +
                                "; required: 2 dims");
}

void require_gating(const char* op, MoeGating g) {
  DT_CHECK(g == MoeGating::Softmax || g == MoeGating::Sigmoid,
           std::string(op) + ": gating = " + std::to_string(static_cast<int>(g)) + "; accepted: softmax, sigmoid");
}

// slots i32 [R, k] beside rows [R, C] and permuted rows [S, C] of one dtype and device.
void require_dispatch(const char* op, Arg rows, Arg slots, Arg permuted) {
  require_float(op, rows);
  require_matrix(op, rows);
  require_matrix(op, permuted);
  require_dtype(op, slots, DType::I32);
  require_matrix(op, slots);
  DT_CHECK(slots.t.dim(0) == rows.t.dim(0), std::string(op) + ": " + slots.name + " has shape " +
                                                shape_str(slots.t.shape()) + "; required: [" +
                                                std::to_string(rows.t.dim(0)) + ", k], a row per row of " + rows.name);
  DT_CHECK(permuted.t.dim(1) == rows.t.dim(1), std::string(op) + ": " + permuted.name + " has shape " +
                                                   shape_str(permuted.t.shape()) + "; required: [S, " +
                                                   std::to_string(rows.t.dim(1)) + "], the width of " + rows.name);
  require_same_dtype(op, {rows, permuted});
  require_same_device(op, {rows, slots, permuted});
}

}  // namespace

const char* moe_gating_name(MoeGating g) { return g == MoeGating::Sigmoid ? "sigmoid" : "softmax"; }

void moe_route(const Tensor& logits, int64_t k, MoeGating gating, bool renormalize, Tensor& idx, Tensor& gates,
               Tensor& probs, Tensor& lse) {
  const char* op = "moe_route";
  require_float(op, {logits, "logits"});
  require_matrix(op, {logits, "logits"});
  require_gating(op, gating);
  const int64_t R = logits.dim(0), E = logits.dim(1);
  DT_CHECK(k >= 1 && k <= E, std::string(op) + ": k = " + std::to_string(k) + "; accepted: 1 to " +
                                 std::to_string(E) + ", the experts (the columns of logits)");
  require_dtype(op, {idx, "idx"}, DType::I32);
  require_shape(op, {idx, "idx"}, {R, k});
  require_dtype(op, {gates, "gates"}, DType::F32);
  require_shape(op, {gates, "gates"}, {R, k});
  require_dtype(op, {probs, "probs"}, DType::F32);
  require_shape(op, {probs, "probs"}, {R, E});
  require_dtype(op, {lse, "lse"}, DType::F32);
  require_shape(op, {lse, "lse"}, {R});
  require_same_device(op, {{logits, "logits"}, {idx, "idx"}, {gates, "gates"}, {probs, "probs"}, {lse, "lse"}});
  DT_BACKEND(logits, moe_route)(logits, k, gating, renormalize, idx, gates, probs, lse);
}

void moe_route_backward(const Tensor& logits, const Tensor& idx, const Tensor& gates, const Tensor& probs,
                        const Tensor& lse, const Tensor& dgates, const Tensor& aux_coef, float z_coef,
                        MoeGating gating, bool renormalize, Tensor& dlogits) {
  const char* op = "moe_route_backward";
  require_float(op, {logits, "logits"});
  require_matrix(op, {logits, "logits"});
  require_gating(op, gating);
  const int64_t R = logits.dim(0), E = logits.dim(1);
  require_dtype(op, {idx, "idx"}, DType::I32);
  require_matrix(op, {idx, "idx"});
  const int64_t k = idx.dim(1);
  DT_CHECK(idx.dim(0) == R && k >= 1 && k <= E, std::string(op) + ": idx has shape " + shape_str(idx.shape()) +
                                                    "; required: [" + std::to_string(R) + ", k], k in 1 to " +
                                                    std::to_string(E));
  for (Arg a : {Arg{gates, "gates"}, Arg{dgates, "dgates"}}) {
    require_dtype(op, a, DType::F32);
    require_shape(op, a, {R, k});
  }
  require_dtype(op, {probs, "probs"}, DType::F32);
  require_shape(op, {probs, "probs"}, {R, E});
  require_dtype(op, {lse, "lse"}, DType::F32);
  require_shape(op, {lse, "lse"}, {R});
  require_dtype(op, {aux_coef, "aux_coef"}, DType::F32);
  require_shape(op, {aux_coef, "aux_coef"}, {E});
  DT_CHECK(std::isfinite(z_coef), std::string(op) + ": z_coef is not finite; accepted: a finite number");
  require_shape(op, {dlogits, "dlogits"}, logits.shape());
  require_same_dtype(op, {{logits, "logits"}, {dlogits, "dlogits"}});
  require_same_device(op, {{logits, "logits"}, {idx, "idx"}, {gates, "gates"}, {probs, "probs"}, {lse, "lse"},
                           {dgates, "dgates"}, {aux_coef, "aux_coef"}, {dlogits, "dlogits"}});
  DT_BACKEND(logits, moe_route_backward)(logits, idx, gates, probs, lse, dgates, aux_coef, z_coef, gating,
                                         renormalize, dlogits);
}

void moe_permute(const Tensor& x, const Tensor& slots, Tensor& xp) {
  require_dispatch("moe_permute", {x, "x"}, {slots, "slots"}, {xp, "xp"});
  DT_BACKEND(x, moe_permute)(x, slots, xp);
}

void moe_permute_backward(const Tensor& dxp, const Tensor& slots, Tensor& dx) {
  require_dispatch("moe_permute_backward", {dx, "dx"}, {slots, "slots"}, {dxp, "dxp"});
  DT_BACKEND(dx, moe_permute_backward)(dxp, slots, dx);
}

void moe_unpermute(const Tensor& yp, const Tensor& slots, const Tensor& gates, Tensor& out) {
  const char* op = "moe_unpermute";
  require_dispatch(op, {out, "out"}, {slots, "slots"}, {yp, "yp"});
  require_dtype(op, {gates, "gates"}, DType::F32);
  require_shape(op, {gates, "gates"}, slots.shape());
  require_same_device(op, {{out, "out"}, {gates, "gates"}});
  DT_BACKEND(out, moe_unpermute)(yp, slots, gates, out);
}

void moe_unpermute_backward(const Tensor& dout, const Tensor& yp, const Tensor& slots, const Tensor& gates,
                            Tensor& dyp, Tensor& dgates) {
  const char* op = "moe_unpermute_backward";
  require_dispatch(op, {dout, "dout"}, {slots, "slots"}, {yp, "yp"});
  require_shape(op, {dyp, "dyp"}, yp.shape());
  require_same_dtype(op, {{yp, "yp"}, {dyp, "dyp"}});
  for (Arg a : {Arg{gates, "gates"}, Arg{dgates, "dgates"}}) {
    require_dtype(op, a, DType::F32);
    require_shape(op, a, slots.shape());
  }
  require_same_device(op, {{dout, "dout"}, {gates, "gates"}, {dyp, "dyp"}, {dgates, "dgates"}});
  DT_BACKEND(dout, moe_unpermute_backward)(dout, yp, slots, gates, dyp, dgates);
}

}  // namespace dt::kernels
