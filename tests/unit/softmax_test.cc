#include <cmath>

#include "kernels/ops.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

std::vector<double> softmax_ref(const std::vector<double>& x, int64_t rows, int64_t c) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < c; ++j) mx = std::fmax(mx, x[r * c + j]);
    for (int64_t j = 0; j < c; ++j) s += std::exp(x[r * c + j] - mx);
    for (int64_t j = 0; j < c; ++j) y[r * c + j] = std::exp(x[r * c + j] - mx) / s;
  }
  return y;
}

TEST(Softmax, ForwardMatchesReferenceAndIsStableForLargeLogits) {
  Tensor x = test::randn({3, 5, 37}, DType::F32, 7, "x", 4.0f);
  x.data<float>()[0] = 1e4f;  // a huge logit must not overflow
  Tensor y = Tensor::zeros(x.shape(), DType::F32);
  kernels::softmax_forward(x, y);
  test::expect_close(test::to_f64(y), softmax_ref(test::to_f64(x), 15, 37), 1e-6, 1e-5, "softmax f32");
}

TEST(Softmax, BackwardMatchesFiniteDifferences) {
  const int64_t rows = 4, c = 9;
  Tensor x = test::randn({rows, c}, DType::F32, 3, "x");
  Tensor dy = test::randn({rows, c}, DType::F32, 3, "dy");
  Tensor y = Tensor::zeros(x.shape(), DType::F32), dx = Tensor::zeros(x.shape(), DType::F32);
  kernels::softmax_forward(x, y);
  kernels::softmax_backward(y, dy, dx);
  auto dyv = test::to_f64(dy);
  auto want = test::finite_diff([&](const std::vector<double>& xv) { return test::dot(softmax_ref(xv, rows, c), dyv); },
                                test::to_f64(x));
  test::expect_close(test::to_f64(dx), want, 1e-5, 1e-4, "softmax backward");
}

TEST(Softmax, Bf16AndF16ComputeInF32) {
  for (DType t : {DType::BF16, DType::F16}) {
    Tensor x = test::randn({6, 64}, t, 11, "x");
    Tensor y = Tensor::zeros(x.shape(), t);
    kernels::softmax_forward(x, y);
    test::expect_close(test::to_f64(y), softmax_ref(test::to_f64(x), 6, 64), 1e-3, 1e-2, dtype_name(t));
  }
}

TEST(Softmax, RejectsMismatchedShapes) {
  Tensor x = Tensor::zeros({2, 3}, DType::F32), y = Tensor::zeros({3, 2}, DType::F32);
  try {
    kernels::softmax_forward(x, y);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DT_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("y has shape [3, 2]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dt
