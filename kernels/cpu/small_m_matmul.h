// matmul's path for at most four rows of C (decoding); small_m_matmul.cc says why.
#pragma once
#include "core/tensor.h"

namespace dt::kernels::cpu {

// Computes c = alpha * a op(b) + beta * c and returns true when c has at most 4 rows (over
// all batch dims), a is not transposed and b is 2-D; returns false (nothing done) otherwise.
bool small_m_matmul(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha, float beta);

}  // namespace dt::kernels::cpu
