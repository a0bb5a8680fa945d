// Losses: each returns the scalar (accumulated in double) and keeps what its backward needs.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace dt::nn {

struct CrossEntropyState {
  Tensor losses, dlosses;  // f32 [R]: per-row loss (0 where ignored), and its gradient
  // Vocab parallel (nn/vocab_parallel.h): f32 [R], each row's log-sum-exp, and scratch:
  // the row max [R] and the partial sums [R, 2] that are all-reduced.
  Tensor lse, max, partial;
  int64_t count = 0;       // rows whose target is not ignore_index
};

// logits: [..., V] (R rows); targets: i32, R elements, in [0, V) or == ignore_index.
// Returns the mean loss over the non-ignored rows (0 when every row is ignored).
double cross_entropy_loss(const Tensor& logits, const Tensor& targets, int32_t ignore_index, CrossEntropyState& s);
// dlogits (overwritten, shape of logits) = grad_scale * d(mean loss) / d logits.
// grad_scale lets an engine weight micro-batches (e.g. 1 / accumulation steps).
void cross_entropy_loss_backward(const Tensor& logits, const Tensor& targets, int32_t ignore_index,
                                 CrossEntropyState& s, Tensor& dlogits, float grad_scale = 1.0f);

// s.dlosses = grad_scale * d(mean loss) / d(loss_r): grad_scale / count in every row (the
// kernels zero the ignored ones). The same for the whole and the vocab-parallel loss.
void fill_mean_loss_grads(CrossEntropyState& s, int64_t rows, float grad_scale);

struct MSEState {
  Tensor diff;  // pred - target
};

// mean over all elements of (pred - target)^2; pred and target have equal shapes.
double mse_loss(const Tensor& pred, const Tensor& target, MSEState& s);
// dpred (overwritten) = grad_scale * 2 (pred - target) / N.
void mse_loss_backward(MSEState& s, Tensor& dpred, float grad_scale = 1.0f);

}  // namespace dt::nn
