// CUDA launchers: one per op, each in its own .cu file beside its kernels. They implement
// the OpTable interface of kernels/ops.h (see there for each op's contract), receive
// validated arguments only, and enqueue on the device's compute stream (gpu_runtime.h).
// Ops that return a value to the host (sum_squares) or reject bad indices the way the CPU
// does (cross_entropy, embedding) synchronize; the rest return before the GPU finishes.
#pragma once
#include "kernels/ops.h"

namespace dt::kernels::cuda {

const OpTable& cuda_op_table();

// One launcher per op of DT_KERNEL_OPS, each of the type ops.h declares it with.
#define DT_DECLARE_LAUNCHER(name) decltype(::dt::kernels::name) name;
DT_KERNEL_OPS(DT_DECLARE_LAUNCHER)
#undef DT_DECLARE_LAUNCHER

// Not in the op table (nn/rope.cc owns rope and computes its tables): x [B, T, H, D] on a
// GPU rotated in place by cos/sin tables of T * D / 2 floats in host memory.
void rope_rotate(Tensor& x, const float* cos_table, const float* sin_table);

}  // namespace dt::kernels::cuda
