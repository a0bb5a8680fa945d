// Rotary position embeddings (RoPE) as small CPU loops: no kernel in the op table has them.
// x: f32, bf16 or f16 [B, T, H, D] (math in f32), D even, rotated in place. Within each head, the pair (i, i + D/2)
// (the "half-split" layout of GPT-NeoX and Llama, and so of Hugging Face checkpoints, whose
// q/k rows need no permutation) turns by the angle (pos0 + t) * inv_freq(i), t the position
// in the sequence.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace dt::nn {

// How the frequencies are stretched for contexts longer than training saw (Hugging Face's
// rope_scaling / rope_parameters "rope_type"): none; "linear" (every frequency / factor,
// i.e. positions / factor); "llama3" (long wavelengths / factor, short ones kept, a smooth
// blend between, from original_context / low_freq_factor and / high_freq_factor).
enum class RopeScalingKind { None, Linear, Llama3 };
struct RopeScaling {
  RopeScalingKind kind = RopeScalingKind::None;
  float factor = 1.0f, low_freq_factor = 1.0f, high_freq_factor = 4.0f;
  int64_t original_context = 8192;
  bool operator==(const RopeScaling& o) const {
    return kind == o.kind && (kind == RopeScalingKind::None ||
                              (factor == o.factor && low_freq_factor == o.low_freq_factor &&
                               high_freq_factor == o.high_freq_factor && original_context == o.original_context));
  }
};
const char* rope_scaling_name(RopeScalingKind k);  // "none", "linear", "llama3"

struct RopeSpec {
  float base = 10000.0f;
  RopeScaling scaling;
  RopeSpec(float b = 10000.0f, RopeScaling s = {}) : base(b), scaling(s) {}  // implicit: plain RoPE of base b
  // The angle per position of pair i of a head of D dims: base^(-2i/D), then scaled.
  double inv_freq(int64_t i, int64_t D) const;
};

void rope_forward(Tensor& x, const RopeSpec& rope, int64_t pos0 = 0);
// A rotation's transpose is the rotation by minus the angle: that is the whole backward.
void rope_backward(Tensor& dx, const RopeSpec& rope, int64_t pos0 = 0);
// The same with row t of every sequence at position positions[t] (T of them): context
// parallelism's chunks (nn/ring_attention.h).
void rope_forward(Tensor& x, const RopeSpec& rope, const std::vector<int64_t>& positions);
void rope_backward(Tensor& dx, const RopeSpec& rope, const std::vector<int64_t>& positions);

}  // namespace dt::nn
