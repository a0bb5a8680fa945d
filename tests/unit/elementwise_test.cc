// fill, scale, add, bias_add, bias_backward and sum_squares against double references.
#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

using Vec = std::vector<double>;

// y[r, c] + b[c], in double.
Vec bias_add_ref(const Vec& y, const Vec& b) {
  Vec out(y);
  for (size_t i = 0; i < y.size(); ++i) out[i] += b[i % b.size()];
  return out;
}

TEST(Elementwise, FillScaleAddMatchReference) {
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    std::string name = dtype_name(t);
    Tensor x = Tensor::zeros({3, 7}, t);
    kernels::fill(x, 1.5f);  // exact in every dtype
    test::expect_close(test::to_f64(x), Vec(21, 1.5), 0, 0, name + " fill");
    Tensor a = test::randn({3, 7}, t, 1, "a"), b = test::randn({3, 7}, t, 1, "b"), out = Tensor::zeros({3, 7}, t);
    Vec av = test::to_f64(a), bv = test::to_f64(b), sum(21), scaled(21);
    for (int i = 0; i < 21; ++i) sum[i] = av[i] + bv[i], scaled[i] = av[i] * -0.75;
    // One rounding of an exact f32 result: 2^-24, 2^-8, 2^-11 relative.
    double tol = t == DType::F32 ? 1e-7 : t == DType::BF16 ? 4e-3 : 5e-4;
    Tensor s = test::converted(a, t);
    kernels::add(a, b, out);
    test::expect_close(test::to_f64(out), sum, tol, tol, name + " add");
    kernels::add(a, b, a);  // out may alias an input
    EXPECT_TRUE(test::same_bits(a, out)) << name << " add in place";
    kernels::scale(s, -0.75f);
    test::expect_close(test::to_f64(s), scaled, tol, tol, name + " scale");
  }
}

TEST(Elementwise, BiasAddAndBackwardMatchReference) {
  const int64_t c = 5;
  Tensor y = test::randn({2, 3, c}, DType::F32, 2, "y"), b = test::randn({c}, DType::F32, 2, "b");
  Tensor dy = test::randn({2, 3, c}, DType::F32, 2, "dy");
  Vec yv = test::to_f64(y), bv = test::to_f64(b), dyv = test::to_f64(dy);
  kernels::bias_add(y, b);
  test::expect_close(test::to_f64(y), bias_add_ref(yv, bv), 1e-7, 1e-7, "bias_add");
  // dbias starts non-zero: bias_backward accumulates.
  Tensor dbias = test::randn({c}, DType::F32, 2, "dbias0");
  Vec want = test::to_f64(dbias);
  Vec fd = test::finite_diff([&](const Vec& v) { return test::dot(bias_add_ref(yv, v), dyv); }, bv);
  for (int64_t j = 0; j < c; ++j) want[j] += fd[j];
  kernels::bias_backward(dy, dbias);
  // Sums of 6 f32 values against a double derivative of a linear function.
  test::expect_close(test::to_f64(dbias), want, 1e-6, 1e-6, "bias_backward");
  Tensor twice = Tensor::zeros({c}, DType::F32);
  kernels::bias_backward(dy, twice);
  Vec once = test::to_f64(twice);
  kernels::bias_backward(dy, twice);
  for (auto& v : once) v *= 2;
  test::expect_close(test::to_f64(twice), once, 0, 0, "bias_backward twice");  // doubling is exact
}

TEST(Elementwise, BiasBf16AndF16CloseToF32) {
  for (DType t : {DType::BF16, DType::F16}) {
    Tensor y = test::randn({16, 24}, t, 3, "y"), b = test::randn({24}, t, 3, "b");
    Tensor dy = test::randn({16, 24}, t, 3, "dy");
    Tensor yf = test::converted(y, DType::F32), bf = test::converted(b, DType::F32);
    Tensor db = Tensor::zeros({24}, t), dbf = Tensor::zeros({24}, DType::F32);
    kernels::bias_add(y, b);
    kernels::bias_add(yf, bf);
    kernels::bias_backward(dy, db);
    kernels::bias_backward(test::converted(dy, DType::F32), dbf);
    // One rounding each (2^-8, 2^-11), of values up to ~4 and sums of 16 unit normals.
    double tol = t == DType::BF16 ? 1e-2 : 2e-3;
    test::expect_close(test::to_f64(y), test::to_f64(yf), tol, tol, std::string(dtype_name(t)) + " bias_add");
    test::expect_close(test::to_f64(db), test::to_f64(dbf), tol, tol, std::string(dtype_name(t)) + " bias_backward");
  }
}

TEST(Elementwise, SumSquaresInDoubleWithInfAndNaN) {
  Tensor x = test::randn({1000, 37}, DType::F32, 4, "x", 100.0f);
  Vec xv = test::to_f64(x);
  double want = 0;
  for (double v : xv) want += v * v;
  // f64 sums in another order: relative error ~ n * 2^-53.
  EXPECT_NEAR(kernels::sum_squares(x), want, want * 1e-12);
  Tensor h = test::converted(x, DType::BF16);
  want = 0;
  for (double v : test::to_f64(h)) want += v * v;
  EXPECT_NEAR(kernels::sum_squares(h), want, want * 1e-12);
  // 3e38^2 overflows f32 but not f64.
  Tensor big = test::from_vec({3e38f, 3e38f}, {2});
  EXPECT_NEAR(kernels::sum_squares(big), 1.8e77, 1.8e77 * 1e-6);
  x.data<float>()[5] = INFINITY;
  EXPECT_EQ(kernels::sum_squares(x), INFINITY);
  x.data<float>()[20000] = NAN;
  EXPECT_TRUE(std::isnan(kernels::sum_squares(x)));
}

TEST(Elementwise, BitwiseSameWithOneAndTwoThreads) {
  // 256 x 300 elements and 64 x 160 rows: two tasks per op with two threads.
  Tensor a = test::randn({256, 300}, DType::BF16, 5, "a"), b = test::randn({256, 300}, DType::BF16, 5, "b");
  Tensor y = test::randn({64, 160}, DType::F32, 5, "y"), bias = test::randn({160}, DType::F32, 5, "bias");
  auto run = [&](double* ss) {
    std::vector<Tensor> r = {Tensor::zeros(a.shape(), DType::BF16), test::converted(a, DType::BF16),
                             Tensor::zeros(a.shape(), DType::F16), test::converted(y, DType::F32),
                             Tensor::zeros({160}, DType::F32)};
    kernels::add(a, b, r[0]);
    kernels::scale(r[1], 0.3f);
    kernels::fill(r[2], -2.25f);
    kernels::bias_add(r[3], bias);
    kernels::bias_backward(y, r[4]);
    *ss = kernels::sum_squares(a);
    return r;
  };
  double ss1, ss2;
  std::vector<Tensor> one, two;
  {
    test::KernelThreads k(1);
    one = run(&ss1);
  }
  {
    test::KernelThreads k(2);
    two = run(&ss2);
  }
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(test::same_bits(one[i], two[i])) << "output " << i;
  EXPECT_EQ(std::memcmp(&ss1, &ss2, sizeof ss1), 0) << ss1 << " vs " << ss2;
}

TEST(Elementwise, RejectsBadArguments) {
  Tensor x = Tensor::zeros({3, 4}, DType::F32), xi = Tensor::zeros({3, 4}, DType::I32), none;
  Tensor x43 = Tensor::zeros({4, 3}, DType::F32), xh = Tensor::zeros({3, 4}, DType::F16);
  Tensor b3 = Tensor::zeros({3}, DType::F32), bh = Tensor::zeros({4}, DType::F16);
  test::expect_invalid([&] { kernels::fill(xi, 1.0f); }, "fill: x has dtype i32");
  test::expect_invalid([&] { kernels::scale(none, 1.0f); }, "scale: x is an empty tensor");
  test::expect_invalid([&] { kernels::add(x, x43, x); }, "add: b has shape [4, 3]");
  test::expect_invalid([&] { kernels::add(x, x, xh); }, "add: out has dtype f16");
  test::expect_invalid([&] { kernels::bias_add(x, b3); }, "bias_add: bias has shape [3]; required: [4]");
  test::expect_invalid([&] { kernels::bias_add(x, bh); }, "bias_add: bias has dtype f16");
  test::expect_invalid([&] { kernels::bias_backward(x, b3); }, "bias_backward: dbias has shape [3]");
  test::expect_invalid([&] { kernels::bias_backward(xi, b3); }, "bias_backward: dy has dtype i32");
  test::expect_invalid([&] { kernels::sum_squares(xi); }, "sum_squares: x has dtype i32");
}

}  // namespace
}  // namespace dt
