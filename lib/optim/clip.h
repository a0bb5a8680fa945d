// Global-norm gradient clipping (as torch.nn.utils.clip_grad_norm_), correct across shards.
//
// The norm is sqrt of the sum over every gradient element of g^2, accumulated in double
// (kernels::sum_squares). When parameters are sharded (ZeRO, TP), each rank holds only part
// of that sum: the caller passes `reduce_sq`, which all-reduces (sums) the local squared sum
// over the ranks that split the parameters, in place. Each rank must contribute every
// element exactly once: a caller whose list holds replicated parameters on several ranks
// counts them on one rank only (or passes them in a separate, unreduced call).
#pragma once
#include <functional>

#include "nn/parameter.h"

namespace dt::optim {

using SquaredSumReducer = std::function<void(double& squared_sum)>;

// The global L2 norm of the gradients; Inf or NaN when any gradient element is (so the
// same call detects overflow for the loss scaler).
double global_grad_norm(const nn::ParamList& params, const SquaredSumReducer& reduce_sq = {});

// The coefficient that brings `norm` down to `max_norm`: max_norm / norm when norm exceeds
// it, else 1. A non-finite norm gives 1 (the step is skipped elsewhere, not scaled to 0).
float clip_coefficient(double norm, double max_norm);

// Scales every gradient by clip_coefficient (when below 1) and returns the norm before
// clipping. A caller that would rather fold the factor into the optimizer's grad_scale
// (saving a pass over the grads) uses global_grad_norm and clip_coefficient instead.
double clip_grad_norm(const nn::ParamList& params, double max_norm, const SquaredSumReducer& reduce_sq = {});

}  // namespace dt::optim
