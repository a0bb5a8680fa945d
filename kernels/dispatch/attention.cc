// attention: validation and dispatch. Shapes follow kernels/ops.h: q, out [B, Tq, Hq, D];
// k, v [B, Tk, Hkv, D]; lse f32 [B, Hq, Tq].
#include <cmath>

#include "kernels/check.h"

namespace dt::kernels {
namespace {

// Checks shared by forward and backward: q/k/v layouts, head grouping, causal offset, scale.
void check_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, float scale, bool causal) {
  require_float(op, {q, "q"});
  DT_CHECK(q.ndim() == 4, std::string(op) + ": q has shape " + shape_str(q.shape()) + "; required: [B, Tq, Hq, D]");
  require_defined(op, {k, "k"});
  DT_CHECK(k.ndim() == 4, std::string(op) + ": k has shape " + shape_str(k.shape()) + "; required: [B, Tk, Hkv, D]");
  require_same_shape(op, {{k, "k"}, {v, "v"}});
  int64_t b = q.dim(0), tq = q.dim(1), hq = q.dim(2), d = q.dim(3), tk = k.dim(1), hkv = k.dim(2);
  DT_CHECK(k.dim(0) == b && k.dim(3) == d, std::string(op) + ": k has shape " + shape_str(k.shape()) +
                                               "; required: [B, Tk, Hkv, D] with B = " + std::to_string(b) +
                                               " and D = " + std::to_string(d) + " as q");
  DT_CHECK(hq % hkv == 0, std::string(op) + ": q has " + std::to_string(hq) + " heads and k has " +
                              std::to_string(hkv) + "; required: Hq a multiple of Hkv");
  DT_CHECK(!causal || tq <= tk, std::string(op) + ": q has Tq = " + std::to_string(tq) + " positions and k has Tk = " +
                         std::to_string(tk) + "; required with causal: Tq <= Tk (queries are the last Tq positions)");
  DT_CHECK(causal || q.device().type == DeviceType::CPU,
           std::string(op) + ": causal = false on " + q.device().str() + ": not built yet; accepted: causal = true, "
           "or tensors on the CPU");
  DT_CHECK(std::isfinite(scale), std::string(op) + ": scale is " + std::to_string(scale) +
                                     "; accepted: a finite number (<= 0 means 1/sqrt(D))");
}

void check_lse(const char* op, const Tensor& q, const Tensor& lse) {
  require_dtype(op, {lse, "lse"}, DType::F32);
  require_shape(op, {lse, "lse"}, {q.dim(0), q.dim(2), q.dim(1)});
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out, Tensor& lse,
                       bool causal) {
  const char* op = "attention_forward";
  check_qkv(op, q, k, v, scale, causal);
  require_same_shape(op, {{q, "q"}, {out, "out"}});
  check_lse(op, q, lse);
  require_same_dtype(op, {{q, "q"}, {k, "k"}, {v, "v"}, {out, "out"}});
  require_same_device(op, {{q, "q"}, {k, "k"}, {v, "v"}, {out, "out"}, {lse, "lse"}});
  DT_BACKEND(q, attention_forward)(q, k, v, scale, out, lse, causal);
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& dout, float scale, Tensor& dq, Tensor& dk, Tensor& dv, bool causal) {
  const char* op = "attention_backward";
  check_qkv(op, q, k, v, scale, causal);
  require_same_shape(op, {{q, "q"}, {out, "out"}, {dout, "dout"}, {dq, "dq"}});
  require_same_shape(op, {{k, "k"}, {dk, "dk"}, {dv, "dv"}});
  check_lse(op, q, lse);
  require_same_dtype(op, {{q, "q"}, {k, "k"}, {v, "v"}, {out, "out"}, {dout, "dout"}, {dq, "dq"}, {dk, "dk"},
                          {dv, "dv"}});
  require_same_device(op, {{q, "q"}, {k, "k"}, {v, "v"}, {out, "out"}, {lse, "lse"}, {dout, "dout"}, {dq, "dq"},
                           {dk, "dk"}, {dv, "dv"}});
  DT_BACKEND(q, attention_backward)(q, k, v, out, lse, dout, scale, dq, dk, dv, causal);
}

}  // namespace dt::kernels
