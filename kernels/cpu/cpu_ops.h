// CPU launchers: one per op, each in its own file beside its kernel. They implement the
// OpTable interface of kernels/ops.h and receive validated arguments only.
#pragma once
#include "kernels/ops.h"

namespace dt::kernels::cpu {

void matmul(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha, float beta);
void softmax_forward(const Tensor& x, Tensor& y);
void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx);
void cast(const Tensor& src, Tensor& dst);

}  // namespace dt::kernels::cpu
