// Rotary position embeddings (RoPE) as small CPU loops: no kernel in the op table has them.
// x: f32, bf16 or f16 [B, T, H, D] (math in f32), D even, rotated in place. Within each head, the pair (i, i + D/2)
// (the "half-split" layout of GPT-NeoX and Llama) turns by the angle
// (pos0 + t) * base^(-2i / D), t the position in the sequence.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace dt::nn {

void rope_forward(Tensor& x, float base, int64_t pos0 = 0);
// A rotation's transpose is the rotation by minus the angle: that is the whole backward.
void rope_backward(Tensor& dx, float base, int64_t pos0 = 0);

}  // namespace dt::nn
