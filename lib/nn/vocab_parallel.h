// Megatron's vocab-parallel embedding and cross-entropy over tp. Each rank owns a contiguous
// slice of the vocabulary: rows [begin, begin + valid) of the token table (and of an untied
// LM head), stored as a part of ceil(V / N) rows whose tail is zero padding when V does not
// divide by N (ShardSpec::pad). The embedding looks up only its own ids (others give zero
// rows, kernels' id -1) and the parts are summed over tp; the head's logits are this rank's
// vocabulary columns only, and the loss combines them without ever forming the whole
// logits: the row max and then the sum of exp and the target's logit are all-reduced, f32
// [R] and [R, 2] per micro-batch. Padding columns never reach the loss (the kernels read
// `valid` columns) and padding rows never reach a checkpoint (place_shard skips them).
#pragma once
#include "nn/loss.h"
#include "nn/tensor_parallel.h"

namespace dt::nn {

struct VocabSlice {
  int64_t vocab = 0;  // the whole vocabulary
  int64_t begin = 0;  // this rank's first id
  int64_t valid = 0;  // ids it holds: [begin, begin + valid)
  int64_t rows = 0;   // rows of its part (>= valid: the rest is padding)
};

// This rank's slice; INVALID_ARGUMENT when some rank would hold no id (V small for N).
VocabSlice vocab_slice(int64_t vocab, const TpGroup& tp);
// The split of a [vocab, C] table: dim 0 over tp, padded.
ShardSpec vocab_spec();
// Host i32 ids -> ids of this slice's rows (id - begin), -1 outside it; on `device`.
Tensor slice_ids(const Tensor& host_ids, const VocabSlice& v, Device device);

// logits: this rank's columns [..., v.rows] (R rows); targets: i32, R elements, whole ids
// in [0, vocab) or ignore_index. Returns the mean loss over non-ignored rows, the same on
// every rank (collective over tp). Keeps the per-row log-sum-exp in s.lse for backward.
double vocab_parallel_cross_entropy(const TpGroup& tp, const VocabSlice& v, const Tensor& logits,
                                    const Tensor& targets, int32_t ignore_index, CrossEntropyState& s);
// dlogits (overwritten, logits' shape): grad_scale * d(mean loss) / d(this rank's logits).
void vocab_parallel_cross_entropy_backward(const VocabSlice& v, const Tensor& logits, const Tensor& targets,
                                           int32_t ignore_index, CrossEntropyState& s, Tensor& dlogits,
                                           float grad_scale = 1.0f);

}  // namespace dt::nn
