// cross_entropy: validation and dispatch. Target values are checked by the backend (it
// reads them where they live) before anything is written.
#include "kernels/check.h"

namespace dt::kernels {
namespace {

void check_common(const char* op, const Tensor& logits, const Tensor& targets) {
  require_float(op, {logits, "logits"});
  DT_CHECK(logits.ndim() == 2, std::string(op) + ": logits has shape " + shape_str(logits.shape()) +
                                   "; required: [R, V]");
  require_dtype(op, {targets, "targets"}, DType::I32);
  require_shape(op, {targets, "targets"}, {logits.dim(0)});
}

}  // namespace

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int32_t ignore_index, Tensor& losses) {
  const char* op = "cross_entropy_forward";
  check_common(op, logits, targets);
  require_dtype(op, {losses, "losses"}, DType::F32);
  require_shape(op, {losses, "losses"}, {logits.dim(0)});
  require_same_device(op, {{logits, "logits"}, {targets, "targets"}, {losses, "losses"}});
  DT_BACKEND(logits, cross_entropy_forward)(logits, targets, ignore_index, losses);
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& dlosses,
                            int32_t ignore_index, Tensor& dlogits) {
  const char* op = "cross_entropy_backward";
  check_common(op, logits, targets);
  require_dtype(op, {dlosses, "dlosses"}, DType::F32);
  require_shape(op, {dlosses, "dlosses"}, {logits.dim(0)});
  require_same_shape(op, {{logits, "logits"}, {dlogits, "dlogits"}});
  require_same_dtype(op, {{logits, "logits"}, {dlogits, "dlogits"}});
  require_same_device(op, {{logits, "logits"}, {targets, "targets"}, {dlosses, "dlosses"}, {dlogits, "dlogits"}});
  DT_BACKEND(logits, cross_entropy_backward)(logits, targets, dlosses, ignore_index, dlogits);
}

}  // namespace dt::kernels
