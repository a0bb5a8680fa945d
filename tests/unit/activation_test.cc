// gelu (tanh approximation), silu, swiglu and the fused bias + gelu against double references.
#include <cmath>

#include "kernels/ops.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

using Vec = std::vector<double>;

double gelu_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
double silu_ref(double x) { return x / (1 + std::exp(-x)); }

struct Unary {
  const char* name;
  void (*forward)(const Tensor&, Tensor&);
  void (*backward)(const Tensor&, const Tensor&, Tensor&);
  double (*ref)(double);
};
const Unary kUnary[] = {{"gelu", kernels::gelu_forward, kernels::gelu_backward, gelu_ref},
                        {"silu", kernels::silu_forward, kernels::silu_backward, silu_ref}};

Vec map(const Vec& x, double (*f)(double)) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = f(x[i]);
  return y;
}
Vec swiglu_ref(const Vec& g, const Vec& u) {
  Vec y(g.size());
  for (size_t i = 0; i < g.size(); ++i) y[i] = silu_ref(g[i]) * u[i];
  return y;
}

// x with its tails: large |x| must saturate cleanly (no NaN from exp/tanh overflow).
Tensor inputs(DType t, uint64_t seed) {
  Tensor x = test::randn({4, 33}, DType::F32, seed, "x", 3.0f);
  float* p = x.data<float>();
  p[0] = -100.0f, p[1] = 100.0f, p[2] = 0.0f, p[3] = -9.0f, p[4] = 9.0f;
  return test::converted(x, t);
}

TEST(Activation, UnaryForwardAndBackwardMatchReference) {
  for (const Unary& op : kUnary) {
    Tensor x = inputs(DType::F32, 1), dy = test::randn(x.shape(), DType::F32, 1, "dy");
    Tensor y = Tensor::zeros(x.shape(), DType::F32), dx = Tensor::zeros(x.shape(), DType::F32);
    op.forward(x, y);
    op.backward(x, dy, dx);
    Vec xv = test::to_f64(x), dyv = test::to_f64(dy);
    // f32 transcendental math: a few ulps.
    test::expect_close(test::to_f64(y), map(xv, op.ref), 1e-6, 1e-5, std::string(op.name) + " y");
    auto loss = [&](const Vec& v) { return test::dot(map(v, op.ref), dyv); };
    test::expect_close(test::to_f64(dx), test::finite_diff(loss, xv), 1e-5, 1e-4, std::string(op.name) + " dx");
  }
}

TEST(Activation, SwigluForwardAndBackwardMatchReference) {
  Tensor g = inputs(DType::F32, 2), u = test::randn(g.shape(), DType::F32, 2, "up");
  Tensor dy = test::randn(g.shape(), DType::F32, 2, "dy");
  Tensor y = Tensor::zeros(g.shape(), DType::F32), dg = test::randn(g.shape(), DType::F32, 9, "stale"),
         du = test::randn(g.shape(), DType::F32, 9, "stale");  // stale grads must be overwritten
  kernels::swiglu_forward(g, u, y);
  kernels::swiglu_backward(g, u, dy, dg, du);
  Vec gv = test::to_f64(g), uv = test::to_f64(u), dyv = test::to_f64(dy);
  test::expect_close(test::to_f64(y), swiglu_ref(gv, uv), 1e-6, 1e-5, "swiglu y");
  auto loss_g = [&](const Vec& v) { return test::dot(swiglu_ref(v, uv), dyv); };
  auto loss_u = [&](const Vec& v) { return test::dot(swiglu_ref(gv, v), dyv); };
  test::expect_close(test::to_f64(dg), test::finite_diff(loss_g, gv), 1e-5, 1e-4, "swiglu dgate");
  test::expect_close(test::to_f64(du), test::finite_diff(loss_u, uv), 1e-5, 1e-4, "swiglu dup");
}

// y = gelu(x + b) against the reference; dx by finite differences; dbias (accumulated onto
// its old value) is the column sum of dx; and in f32 the fused pass gives the same bits as
// bias_add, gelu and bias_backward one after another.
TEST(Activation, BiasGeluMatchesReferenceAndTheUnfusedOps) {
  Tensor x = inputs(DType::F32, 5), b = test::randn({x.cols()}, DType::F32, 5, "bias");
  Tensor dy = test::randn(x.shape(), DType::F32, 5, "dy"), db0 = test::randn({x.cols()}, DType::F32, 6, "db0");
  Tensor y = Tensor::zeros(x.shape(), DType::F32), dx = test::randn(x.shape(), DType::F32, 9, "stale");
  Tensor db = test::converted(db0, DType::F32);
  kernels::bias_gelu_forward(x, b, y);
  kernels::bias_gelu_backward(x, b, dy, dx, db);
  const int64_t R = x.rows(), C = x.cols();
  Vec xv = test::to_f64(x), bv = test::to_f64(b), dyv = test::to_f64(dy);
  auto fwd = [&](const Vec& xs, const Vec& bs) {
    Vec out(xs.size());
    for (int64_t i = 0; i < R * C; ++i) out[i] = gelu_ref(xs[i] + bs[i % C]);
    return out;
  };
  test::expect_close(test::to_f64(y), fwd(xv, bv), 1e-6, 1e-5, "bias_gelu y");
  auto loss_x = [&](const Vec& v) { return test::dot(fwd(v, bv), dyv); };
  test::expect_close(test::to_f64(dx), test::finite_diff(loss_x, xv), 1e-5, 1e-4, "bias_gelu dx");
  Vec want_db = test::to_f64(db0), dxv = test::to_f64(dx);
  for (int64_t i = 0; i < R * C; ++i) want_db[i % C] += dxv[i];
  test::expect_close(test::to_f64(db), want_db, 1e-6, 1e-5, "bias_gelu dbias");

  // The unfused ops: x + b written out, gelu of it, then its gradient and bias_backward.
  Tensor h = test::converted(x, DType::F32), y2 = Tensor::zeros(x.shape(), DType::F32);
  Tensor dx2 = Tensor::zeros(x.shape(), DType::F32), db2 = test::converted(db0, DType::F32);
  kernels::bias_add(h, b);
  kernels::gelu_forward(h, y2);
  kernels::gelu_backward(h, dy, dx2);
  kernels::bias_backward(dx2, db2);
  EXPECT_TRUE(test::same_bits(y, y2));
  EXPECT_TRUE(test::same_bits(dx, dx2));
  EXPECT_TRUE(test::same_bits(db, db2));

  // No bias: plain gelu.
  Tensor y3 = Tensor::zeros(x.shape(), DType::F32), y4 = Tensor::zeros(x.shape(), DType::F32), none;
  kernels::bias_gelu_forward(x, none, y3);
  kernels::gelu_forward(x, y4);
  EXPECT_TRUE(test::same_bits(y3, y4));
}

TEST(Activation, Bf16AndF16CloseToF32) {
  for (DType t : {DType::BF16, DType::F16}) {
    // f32 on the same (already rounded) values: the only differences are output roundings.
    double tol = t == DType::BF16 ? 8e-3 : 1e-3;  // a bit over one rounding: 2^-8 and 2^-11
    std::string name = dtype_name(t);
    Tensor x = inputs(t, 3), u = test::randn(x.shape(), t, 3, "up"), dy = test::randn(x.shape(), t, 3, "dy");
    Tensor xf = test::converted(x, DType::F32), uf = test::converted(u, DType::F32);
    Tensor dyf = test::converted(dy, DType::F32);
    auto lo = [&] { return Tensor::zeros(x.shape(), t); };
    auto hi = [&] { return Tensor::zeros(x.shape(), DType::F32); };
    for (const Unary& op : kUnary) {
      Tensor y = lo(), dx = lo(), yf = hi(), dxf = hi();
      op.forward(x, y);
      op.backward(x, dy, dx);
      op.forward(xf, yf);
      op.backward(xf, dyf, dxf);
      test::expect_close(test::to_f64(y), test::to_f64(yf), tol, tol, name + " " + op.name + " y");
      test::expect_close(test::to_f64(dx), test::to_f64(dxf), tol, tol, name + " " + op.name + " dx");
    }
    Tensor y = lo(), dg = lo(), du = lo(), yf = hi(), dgf = hi(), duf = hi();
    kernels::swiglu_forward(x, u, y);
    kernels::swiglu_backward(x, u, dy, dg, du);
    kernels::swiglu_forward(xf, uf, yf);
    kernels::swiglu_backward(xf, uf, dyf, dgf, duf);
    test::expect_close(test::to_f64(y), test::to_f64(yf), tol, tol, name + " swiglu y");
    test::expect_close(test::to_f64(dg), test::to_f64(dgf), tol, tol, name + " swiglu dgate");
    test::expect_close(test::to_f64(du), test::to_f64(duf), tol, tol, name + " swiglu dup");
    Tensor b = test::randn({x.cols()}, t, 3, "bias"), bf = test::converted(b, DType::F32);
    Tensor db = Tensor::zeros({x.cols()}, t), dbf = Tensor::zeros({x.cols()}, DType::F32);
    kernels::bias_gelu_forward(x, b, y);
    kernels::bias_gelu_backward(x, b, dy, dg, db);
    kernels::bias_gelu_forward(xf, bf, yf);
    kernels::bias_gelu_backward(xf, bf, dyf, dgf, dbf);
    test::expect_close(test::to_f64(y), test::to_f64(yf), tol, tol, name + " bias_gelu y");
    test::expect_close(test::to_f64(dg), test::to_f64(dgf), tol, tol, name + " bias_gelu dx");
    test::expect_close(test::to_f64(db), test::to_f64(dbf), tol, tol, name + " bias_gelu dbias");
  }
}

TEST(Activation, BitwiseSameWithOneAndTwoThreads) {
  // 128 x 160 elements: five tasks' worth, split in two with two threads.
  Tensor x = test::randn({128, 160}, DType::BF16, 4, "x"), u = test::randn({128, 160}, DType::BF16, 4, "up");
  Tensor dy = test::randn({128, 160}, DType::BF16, 4, "dy");
  auto all = [&] {
    std::vector<Tensor> out;
    for (int i = 0; i < 9; ++i) out.push_back(Tensor::zeros(x.shape(), DType::BF16));
    Tensor b = test::randn({x.cols()}, DType::BF16, 4, "bias"), db = Tensor::zeros({x.cols()}, DType::BF16);
    kernels::gelu_forward(x, out[0]);
    kernels::gelu_backward(x, dy, out[1]);
    kernels::silu_forward(x, out[2]);
    kernels::silu_backward(x, dy, out[3]);
    kernels::swiglu_forward(x, u, out[4]);
    kernels::swiglu_backward(x, u, dy, out[5], out[6]);
    kernels::bias_gelu_forward(x, b, out[7]);
    kernels::bias_gelu_backward(x, b, dy, out[8], db);
    out.push_back(db);
    return out;
  };
  std::vector<Tensor> one, two;
  {
    test::KernelThreads k(1);
    one = all();
  }
  {
    test::KernelThreads k(2);
    two = all();
  }
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(test::same_bits(one[i], two[i])) << "output " << i;
}

TEST(Activation, RejectsBadArguments) {
  Tensor x = Tensor::zeros({3, 4}, DType::F32), y = Tensor::zeros({3, 4}, DType::F32), none;
  Tensor y43 = Tensor::zeros({4, 3}, DType::F32), yh = Tensor::zeros({3, 4}, DType::BF16);
  Tensor xi = Tensor::zeros({3, 4}, DType::I64);
  test::expect_invalid([&] { kernels::gelu_forward(x, y43); }, "gelu_forward: y has shape [4, 3]");
  test::expect_invalid([&] { kernels::gelu_backward(x, yh, y); }, "gelu_backward: dy has dtype bf16");
  test::expect_invalid([&] { kernels::silu_forward(xi, y); }, "silu_forward: x has dtype i64");
  test::expect_invalid([&] { kernels::silu_backward(x, y, none); }, "silu_backward: dx is an empty tensor");
  test::expect_invalid([&] { kernels::swiglu_forward(x, y43, y); }, "swiglu_forward: up has shape [4, 3]");
  test::expect_invalid([&] { kernels::swiglu_backward(x, y, y, y, yh); }, "swiglu_backward: dup has dtype bf16");
  test::expect_invalid([&] { kernels::swiglu_backward(x, y, y, none, y); }, "dgate is an empty tensor");
  Tensor b4 = Tensor::zeros({4}, DType::F32), b3 = Tensor::zeros({3}, DType::F32);
  test::expect_invalid([&] { kernels::bias_gelu_forward(x, b3, y); }, "bias_gelu_forward: bias has shape [3]");
  test::expect_invalid([&] { kernels::bias_gelu_backward(x, b4, y, y, b3); }, "bias_gelu_backward: dbias has shape [3]");
  test::expect_invalid([&] { kernels::bias_gelu_backward(x, none, y, y, b4); }, "dbias is given but bias is not");
}

}  // namespace
}  // namespace dt
