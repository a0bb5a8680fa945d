// cross_entropy_shard_*: validation and dispatch of the vocab-parallel cross-entropy.
// Whether each target is ignore_index or >= 0 is data, checked by the backend before
// anything is written; whether it is below the vocabulary size cannot be checked on a shard.
#include "kernels/check.h"

namespace dt::kernels {
namespace {

void check_shard_logits(const char* op, const Tensor& logits, int64_t valid) {
  require_float(op, {logits, "logits"});
  DT_CHECK(logits.ndim() == 2, std::string(op) + ": logits has shape " + shape_str(logits.shape()) +
                                   "; required: [R, Vs], this rank's columns of the logits");
  int64_t vs = logits.dim(1);
  DT_CHECK(valid >= 1 && valid <= vs, std::string(op) + ": valid is " + std::to_string(valid) +
                                          "; accepted: 1 to Vs = " + std::to_string(vs) +
                                          " (the columns of logits that are vocabulary, not padding)");
}

void check_shard_targets(const char* op, const Tensor& logits, const Tensor& targets, int64_t vocab_begin) {
  require_dtype(op, {targets, "targets"}, DType::I32);
  require_shape(op, {targets, "targets"}, {logits.dim(0)});
  DT_CHECK(vocab_begin >= 0, std::string(op) + ": vocab_begin is " + std::to_string(vocab_begin) +
                                 "; accepted: >= 0, the vocabulary id of this shard's first column");
}

// An f32 tensor of one value per row of logits.
void require_per_row(const char* op, Arg a, const Tensor& logits) {
  require_dtype(op, a, DType::F32);
  require_shape(op, a, {logits.dim(0)});
}

}  // namespace

void cross_entropy_shard_max(const Tensor& logits, int64_t valid, Tensor& row_max) {
  const char* op = "cross_entropy_shard_max";
  check_shard_logits(op, logits, valid);
  require_per_row(op, {row_max, "row_max"}, logits);
  require_same_device(op, {{logits, "logits"}, {row_max, "row_max"}});
  DT_BACKEND(logits, cross_entropy_shard_max)(logits, valid, row_max);
}

void cross_entropy_shard_forward(const Tensor& logits, const Tensor& targets, int64_t vocab_begin, int64_t valid,
                                 int32_t ignore_index, const Tensor& row_max, Tensor& partial) {
  const char* op = "cross_entropy_shard_forward";
  check_shard_logits(op, logits, valid);
  check_shard_targets(op, logits, targets, vocab_begin);
  require_per_row(op, {row_max, "row_max"}, logits);
  require_dtype(op, {partial, "partial"}, DType::F32);
  require_shape(op, {partial, "partial"}, {logits.dim(0), 2});
  require_same_device(op, {{logits, "logits"}, {targets, "targets"}, {row_max, "row_max"}, {partial, "partial"}});
  DT_BACKEND(logits, cross_entropy_shard_forward)(logits, targets, vocab_begin, valid, ignore_index, row_max, partial);
}

void cross_entropy_shard_backward(const Tensor& logits, const Tensor& targets, int64_t vocab_begin, int64_t valid,
                                  int32_t ignore_index, const Tensor& lse, const Tensor& dlosses, Tensor& dlogits) {
  const char* op = "cross_entropy_shard_backward";
  check_shard_logits(op, logits, valid);
  check_shard_targets(op, logits, targets, vocab_begin);
  require_per_row(op, {lse, "lse"}, logits);
  require_per_row(op, {dlosses, "dlosses"}, logits);
  require_same_shape(op, {{logits, "logits"}, {dlogits, "dlogits"}});
  require_same_dtype(op, {{logits, "logits"}, {dlogits, "dlogits"}});
  require_same_device(op, {{logits, "logits"}, {targets, "targets"}, {lse, "lse"}, {dlosses, "dlosses"},
                           {dlogits, "dlogits"}});
  DT_BACKEND(logits, cross_entropy_shard_backward)(logits, targets, vocab_begin, valid, ignore_index, lse, dlosses,
                                                   dlogits);
}

}  // namespace dt::kernels
