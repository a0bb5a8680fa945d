#include <cmath>

#include "kernels/ops.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

constexpr float kEps = 1e-6f;
using Vec = std::vector<double>;

// Per row: y = x / sqrt(mean(x^2) + eps) * w, in double; rstd returned too.
Vec rmsnorm_ref(const Vec& x, const Vec& w, int64_t c, Vec* rstd = nullptr) {
  int64_t rows = static_cast<int64_t>(x.size()) / c;
  Vec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < c; ++j) ss += x[r * c + j] * x[r * c + j] / c;
    double rs = 1 / std::sqrt(ss + kEps);
    for (int64_t j = 0; j < c; ++j) y[r * c + j] = x[r * c + j] * rs * w[j];
    if (rstd) rstd->push_back(rs);
  }
  return y;
}

struct Result {
  Tensor y, rstd, dx, dw;
};

// Forward, then backward with dy; dw starts at zero.
Result run(const Tensor& x, const Tensor& w, const Tensor& dy) {
  DType t = x.dtype();
  Result o{Tensor::zeros(x.shape(), t), Tensor::zeros({x.rows()}, DType::F32), Tensor::zeros(x.shape(), t),
           Tensor::zeros({x.cols()}, t)};
  kernels::rmsnorm_forward(x, w, kEps, o.y, o.rstd);
  kernels::rmsnorm_backward(dy, x, w, o.rstd, o.dx, o.dw);
  return o;
}

TEST(RmsNorm, ForwardMatchesReference) {
  Tensor x = test::randn({2, 3, 96}, DType::F32, 1, "x", 3.0f), w = test::randn({96}, DType::F32, 1, "w");
  Vec rstd;
  Vec want = rmsnorm_ref(test::to_f64(x), test::to_f64(w), 96, &rstd);
  Result o = run(x, w, Tensor::zeros(x.shape(), DType::F32));
  // f32 math over 96 values: a few ulps.
  test::expect_close(test::to_f64(o.y), want, 1e-6, 1e-5, "y");
  test::expect_close(test::to_f64(o.rstd), rstd, 1e-7, 1e-5, "rstd");
}

TEST(RmsNorm, BackwardMatchesFiniteDifferences) {
  const int64_t rows = 5, c = 6;
  Tensor x = test::randn({rows, c}, DType::F32, 2, "x"), dy = test::randn({rows, c}, DType::F32, 2, "dy");
  Tensor w = test::randn({c}, DType::F32, 2, "w");
  Vec xv = test::to_f64(x), wv = test::to_f64(w), dyv = test::to_f64(dy);
  Result o = run(x, w, dy);
  // f32 kernel against double central differences (step 1e-6): agreement to ~1e-5.
  auto loss_x = [&](const Vec& v) { return test::dot(rmsnorm_ref(v, wv, c), dyv); };
  auto loss_w = [&](const Vec& v) { return test::dot(rmsnorm_ref(xv, v, c), dyv); };
  test::expect_close(test::to_f64(o.dx), test::finite_diff(loss_x, xv), 2e-5, 1e-4, "dx");
  test::expect_close(test::to_f64(o.dw), test::finite_diff(loss_w, wv), 2e-5, 1e-4, "dweight");
}

TEST(RmsNorm, DweightAccumulatesAndDxIsOverwritten) {
  Tensor x = test::randn({6, 40}, DType::F32, 3, "x"), dy = test::randn({6, 40}, DType::F32, 3, "dy");
  Tensor w = test::randn({40}, DType::F32, 3, "w");
  Result o = run(x, w, dy);
  Tensor dx_first = test::converted(o.dx, DType::F32);
  Vec dw2 = test::to_f64(o.dw);
  for (auto& v : dw2) v *= 2;
  kernels::rmsnorm_backward(dy, x, w, o.rstd, o.dx, o.dw);
  EXPECT_TRUE(test::same_bits(o.dx, dx_first));
  test::expect_close(test::to_f64(o.dw), dw2, 0, 0, "dweight after two calls");  // doubling is exact
}

TEST(RmsNorm, Bf16AndF16CloseToF32) {
  for (DType t : {DType::BF16, DType::F16}) {
    Tensor x = test::randn({8, 64}, t, 4, "x"), dy = test::randn({8, 64}, t, 4, "dy"), w = test::randn({64}, t, 4, "w");
    // f32 on the same (already rounded) values: the only differences are output roundings.
    Result lo = run(x, w, dy);
    Result hi = run(test::converted(x, DType::F32), test::converted(w, DType::F32), test::converted(dy, DType::F32));
    double tol = t == DType::BF16 ? 8e-3 : 1e-3;  // a bit over one rounding: 2^-8 and 2^-11
    std::string name = dtype_name(t);
    test::expect_close(test::to_f64(lo.y), test::to_f64(hi.y), tol, tol, name + " y");
    EXPECT_TRUE(test::same_bits(lo.rstd, hi.rstd)) << name;
    test::expect_close(test::to_f64(lo.dx), test::to_f64(hi.dx), tol, tol, name + " dx");
    test::expect_close(test::to_f64(lo.dw), test::to_f64(hi.dw), tol, tol, name + " dweight");
  }
}

TEST(RmsNorm, BitwiseSameWithOneAndTwoThreads) {
  // 64 x 160 splits into two row tasks and two column tasks with two threads.
  for (DType t : {DType::F32, DType::F16}) {
    Tensor x = test::randn({64, 160}, t, 5, "x"), dy = test::randn({64, 160}, t, 5, "dy");
    Tensor w = test::randn({160}, t, 5, "w");
    Result one, two;
    {
      test::KernelThreads k(1);
      one = run(x, w, dy);
    }
    {
      test::KernelThreads k(2);
      two = run(x, w, dy);
    }
    for (auto m : {&Result::y, &Result::rstd, &Result::dx, &Result::dw})
      EXPECT_TRUE(test::same_bits(one.*m, two.*m)) << dtype_name(t);
  }
}

TEST(RmsNorm, RejectsBadArguments) {
  Tensor x = Tensor::zeros({4, 8}, DType::F32), y = Tensor::zeros({4, 8}, DType::F32);
  Tensor w = Tensor::zeros({8}, DType::F32), rstd = Tensor::zeros({4}, DType::F32), none;
  Tensor w2 = Tensor::zeros({2, 4}, DType::F32), wh = Tensor::zeros({8}, DType::F16);
  Tensor rstd5 = Tensor::zeros({5}, DType::F32), rstd_i = Tensor::zeros({4}, DType::I32);
  using kernels::rmsnorm_forward;
  test::expect_invalid([&] { rmsnorm_forward(x, w2, kEps, y, rstd); }, "weight has shape [2, 4]; required: [8]");
  test::expect_invalid([&] { rmsnorm_forward(x, wh, kEps, y, rstd); }, "weight has dtype f16");
  test::expect_invalid([&] { rmsnorm_forward(x, w, kEps, y, rstd5); }, "rstd has 5 values");
  test::expect_invalid([&] { rmsnorm_forward(x, w, kEps, y, rstd_i); }, "rstd has dtype i32");
  test::expect_invalid([&] { rmsnorm_forward(x, w, kEps, none, rstd); }, "y is an empty tensor");
  test::expect_invalid([&] { rmsnorm_forward(x, w, NAN, y, rstd); }, "eps is nan");
  Tensor dx = Tensor::zeros({4, 8}, DType::F32), dw = Tensor::zeros({8}, DType::F32);
  Tensor dxh = Tensor::zeros({4, 8}, DType::F16), dw9 = Tensor::zeros({9}, DType::F32);
  using kernels::rmsnorm_backward;
  test::expect_invalid([&] { rmsnorm_backward(y, x, w, rstd, dxh, dw); }, "dx has dtype f16");
  test::expect_invalid([&] { rmsnorm_backward(y, x, w, rstd, dx, dw9); }, "dweight has shape [9]");
  test::expect_invalid([&] { rmsnorm_backward(none, x, w, rstd, dx, dw); }, "dy is an empty tensor");
}

}  // namespace
}  // namespace dt
