#include <cmath>

#include "kernels/ops.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

constexpr float kEps = 1e-5f;
using Vec = std::vector<double>;

// Per row: y = (x - mean) / sqrt(var + eps) * w + b, in double; mean and rstd returned too.
Vec layernorm_ref(const Vec& x, const Vec& w, const Vec& b, int64_t c, Vec* mean = nullptr, Vec* rstd = nullptr) {
  int64_t rows = static_cast<int64_t>(x.size()) / c;
  Vec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < c; ++j) m += x[r * c + j] / c;
    for (int64_t j = 0; j < c; ++j) v += (x[r * c + j] - m) * (x[r * c + j] - m) / c;
    double rs = 1 / std::sqrt(v + kEps);
    for (int64_t j = 0; j < c; ++j) y[r * c + j] = (x[r * c + j] - m) * rs * w[j] + (b.empty() ? 0.0 : b[j]);
    if (mean) mean->push_back(m);
    if (rstd) rstd->push_back(rs);
  }
  return y;
}

struct Result {
  Tensor y, mean, rstd, dx, dw, db;
};

// Forward, then backward with dy; dw and db start at zero. b undefined: no bias, no dbias.
Result run(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& dy) {
  DType t = x.dtype();
  int64_t c = x.cols(), rows = x.rows();
  Result o{Tensor::zeros(x.shape(), t), Tensor::zeros({rows}, DType::F32), Tensor::zeros({rows}, DType::F32),
           Tensor::zeros(x.shape(), t), Tensor::zeros({c}, t), b.defined() ? Tensor::zeros({c}, t) : Tensor()};
  kernels::layernorm_forward(x, w, b, kEps, o.y, o.mean, o.rstd);
  kernels::layernorm_backward(dy, x, w, o.mean, o.rstd, o.dx, o.dw, o.db);
  return o;
}

TEST(LayerNorm, ForwardMatchesReferenceWithAndWithoutBias) {
  Tensor x = test::randn({3, 5, 48}, DType::F32, 1, "x", 2.0f);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] += 30.0f;  // a large mean must not cost precision
  Tensor w = test::randn({48}, DType::F32, 1, "w"), b = test::randn({48}, DType::F32, 1, "b");
  Tensor dy = Tensor::zeros(x.shape(), DType::F32);
  Vec mean, rstd;
  Vec want = layernorm_ref(test::to_f64(x), test::to_f64(w), test::to_f64(b), 48, &mean, &rstd);
  Result o = run(x, w, b, dy);
  // f32 math over 48 values of size ~30: a few ulps of 30 after normalizing by std 2.
  test::expect_close(test::to_f64(o.y), want, 2e-5, 2e-5, "y");
  test::expect_close(test::to_f64(o.mean), mean, 1e-5, 1e-6, "mean");
  test::expect_close(test::to_f64(o.rstd), rstd, 1e-6, 2e-5, "rstd");
  Result nb = run(x, w, Tensor(), dy);
  test::expect_close(test::to_f64(nb.y), layernorm_ref(test::to_f64(x), test::to_f64(w), {}, 48), 2e-5, 2e-5,
                     "y without bias");
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  const int64_t rows = 4, c = 7;
  Tensor x = test::randn({rows, c}, DType::F32, 2, "x"), dy = test::randn({rows, c}, DType::F32, 2, "dy");
  Tensor w = test::randn({c}, DType::F32, 2, "w"), b = test::randn({c}, DType::F32, 2, "b");
  Vec xv = test::to_f64(x), wv = test::to_f64(w), bv = test::to_f64(b), dyv = test::to_f64(dy);
  Result o = run(x, w, b, dy);
  // f32 kernel against double central differences (step 1e-6): agreement to ~1e-5.
  auto loss_x = [&](const Vec& v) { return test::dot(layernorm_ref(v, wv, bv, c), dyv); };
  auto loss_w = [&](const Vec& v) { return test::dot(layernorm_ref(xv, v, bv, c), dyv); };
  auto loss_b = [&](const Vec& v) { return test::dot(layernorm_ref(xv, wv, v, c), dyv); };
  test::expect_close(test::to_f64(o.dx), test::finite_diff(loss_x, xv), 2e-5, 1e-4, "dx");
  test::expect_close(test::to_f64(o.dw), test::finite_diff(loss_w, wv), 2e-5, 1e-4, "dweight");
  test::expect_close(test::to_f64(o.db), test::finite_diff(loss_b, bv), 2e-5, 1e-4, "dbias");
  // Without dbias, dx and dweight are unchanged.
  Tensor mean = o.mean, rstd = o.rstd, dx = Tensor::zeros(x.shape(), DType::F32), dw = Tensor::zeros({c}, DType::F32);
  Tensor none;
  kernels::layernorm_backward(dy, x, w, mean, rstd, dx, dw, none);
  EXPECT_TRUE(test::same_bits(dx, o.dx));
  EXPECT_TRUE(test::same_bits(dw, o.dw));
}

TEST(LayerNorm, ParamGradsAccumulateAndDxIsOverwritten) {
  Tensor x = test::randn({6, 40}, DType::F32, 3, "x"), dy = test::randn({6, 40}, DType::F32, 3, "dy");
  Tensor w = test::randn({40}, DType::F32, 3, "w"), b = test::randn({40}, DType::F32, 3, "b");
  Result o = run(x, w, b, dy);
  Tensor dx_first = test::converted(o.dx, DType::F32);
  kernels::layernorm_backward(dy, x, w, o.mean, o.rstd, o.dx, o.dw, o.db);
  EXPECT_TRUE(test::same_bits(o.dx, dx_first));
  Result once = run(x, w, b, dy);
  Vec dw1 = test::to_f64(once.dw), db1 = test::to_f64(once.db);
  for (auto& v : dw1) v *= 2;
  for (auto& v : db1) v *= 2;
  test::expect_close(test::to_f64(o.dw), dw1, 0, 0, "dweight after two calls");  // doubling is exact
  test::expect_close(test::to_f64(o.db), db1, 0, 0, "dbias after two calls");
}

TEST(LayerNorm, Bf16AndF16CloseToF32) {
  for (DType t : {DType::BF16, DType::F16}) {
    Tensor x = test::randn({8, 64}, t, 4, "x"), dy = test::randn({8, 64}, t, 4, "dy");
    Tensor w = test::randn({64}, t, 4, "w"), b = test::randn({64}, t, 4, "b");
    // f32 on the same (already rounded) values: the only differences are output roundings.
    Result lo = run(x, w, b, dy);
    Result hi = run(test::converted(x, DType::F32), test::converted(w, DType::F32), test::converted(b, DType::F32),
                    test::converted(dy, DType::F32));
    double tol = t == DType::BF16 ? 8e-3 : 1e-3;  // a bit over one rounding: 2^-8 and 2^-11
    std::string name = dtype_name(t);
    test::expect_close(test::to_f64(lo.y), test::to_f64(hi.y), tol, tol, name + " y");
    EXPECT_TRUE(test::same_bits(lo.mean, hi.mean) && test::same_bits(lo.rstd, hi.rstd)) << name;
    test::expect_close(test::to_f64(lo.dx), test::to_f64(hi.dx), tol, tol, name + " dx");
    test::expect_close(test::to_f64(lo.dw), test::to_f64(hi.dw), tol, tol, name + " dweight");
    test::expect_close(test::to_f64(lo.db), test::to_f64(hi.db), tol, tol, name + " dbias");
  }
}

TEST(LayerNorm, BitwiseSameWithOneAndTwoThreads) {
  // 64 x 160 splits into two row tasks and two column tasks with two threads.
  for (DType t : {DType::F32, DType::BF16}) {
    Tensor x = test::randn({64, 160}, t, 5, "x"), dy = test::randn({64, 160}, t, 5, "dy");
    Tensor w = test::randn({160}, t, 5, "w"), b = test::randn({160}, t, 5, "b");
    Result one, two;
    {
      test::KernelThreads k(1);
      one = run(x, w, b, dy);
    }
    {
      test::KernelThreads k(2);
      two = run(x, w, b, dy);
    }
    for (auto m : {&Result::y, &Result::mean, &Result::rstd, &Result::dx, &Result::dw, &Result::db})
      EXPECT_TRUE(test::same_bits(one.*m, two.*m)) << dtype_name(t);
  }
}

TEST(LayerNorm, RejectsBadArguments) {
  Tensor x = Tensor::zeros({4, 8}, DType::F32), y = Tensor::zeros({4, 8}, DType::F32);
  Tensor w = Tensor::zeros({8}, DType::F32), b = Tensor::zeros({8}, DType::F32);
  Tensor mean = Tensor::zeros({4}, DType::F32), rstd = Tensor::zeros({4}, DType::F32), none;
  Tensor w7 = Tensor::zeros({7}, DType::F32), bb = Tensor::zeros({8}, DType::BF16);
  Tensor mean16 = Tensor::zeros({4}, DType::BF16), rstd3 = Tensor::zeros({3}, DType::F32);
  Tensor y2 = Tensor::zeros({4, 2, 4}, DType::F32), xi = Tensor::zeros({4, 8}, DType::I32);
  using kernels::layernorm_forward;
  test::expect_invalid([&] { layernorm_forward(x, w7, b, kEps, y, mean, rstd); }, "weight has shape [7]");
  test::expect_invalid([&] { layernorm_forward(x, w, bb, kEps, y, mean, rstd); }, "bias has dtype bf16");
  test::expect_invalid([&] { layernorm_forward(x, w, b, kEps, y, mean16, rstd); }, "mean has dtype bf16");
  test::expect_invalid([&] { layernorm_forward(x, w, b, kEps, y, mean, rstd3); }, "rstd has 3 values");
  test::expect_invalid([&] { layernorm_forward(x, w, b, kEps, y2, mean, rstd); }, "y has shape [4, 2, 4]");
  test::expect_invalid([&] { layernorm_forward(none, w, b, kEps, y, mean, rstd); }, "x is an empty tensor");
  test::expect_invalid([&] { layernorm_forward(xi, w, b, kEps, y, mean, rstd); }, "x has dtype i32");
  test::expect_invalid([&] { layernorm_forward(x, w, b, -1.0f, y, mean, rstd); }, "eps is -1");
  Tensor dx = Tensor::zeros({4, 8}, DType::F32), dw = Tensor::zeros({8}, DType::F32), db7 = w7;
  using kernels::layernorm_backward;
  test::expect_invalid([&] { layernorm_backward(y2, x, w, mean, rstd, dx, dw, b); }, "dy has shape");
  test::expect_invalid([&] { layernorm_backward(y, x, w, mean, rstd, dx, none, b); }, "dweight is an empty tensor");
  test::expect_invalid([&] { layernorm_backward(y, x, w, mean, rstd, dx, dw, db7); }, "dbias has shape [7]");
  test::expect_invalid([&] { layernorm_backward(y, x, w, rstd3, rstd, dx, dw, b); }, "mean has 3 values");
}

}  // namespace
}  // namespace dt
