// Helpers shared by the unit tests: tensors from vectors and back, closeness checks, and
// central finite differences in double precision for checking backward kernels.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace dt::test {

// A tensor of normal(0, std) values keyed by (seed, name).
Tensor randn(const Shape& shape, DType dtype = DType::F32, uint64_t seed = 1, const std::string& name = "x",
             float std = 1.0f);
Tensor from_vec(const std::vector<float>& v, const Shape& shape, DType dtype = DType::F32);
Tensor from_ints(const std::vector<int32_t>& v, const Shape& shape);
// Values of a floating tensor, widened to double.
std::vector<double> to_f64(const Tensor& t);

// EXPECT that |got - want| <= atol + rtol * |want| elementwise; reports the worst element.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double atol, double rtol,
                  const std::string& what);

// d f / d x by central differences in double precision, with step eps.
std::vector<double> finite_diff(const std::function<double(const std::vector<double>&)>& f,
                                std::vector<double> x, double eps = 1e-6);

// sum_i a[i] * b[i], the scalar loss used to turn a vector output into a gradient check.
double dot(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace dt::test
