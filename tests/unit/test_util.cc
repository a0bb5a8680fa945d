#include "unit/test_util.h"

#include "core/rng.h"

#include <cmath>

#include "core/random_fill.h"
#include "kernels/ops.h"

namespace dt::test {

Tensor randn(const Shape& shape, DType dtype, uint64_t seed, const std::string& name, float std) {
  Tensor t = Tensor::zeros(shape, dtype);
  fill_random(t, Distribution::Normal, seed, name, 0, 0.0f, std);
  return t;
}

Tensor from_vec(const std::vector<float>& v, const Shape& shape, DType dtype) {
  Tensor f = Tensor::zeros(shape, DType::F32);
  EXPECT_EQ(static_cast<int64_t>(v.size()), f.numel());
  std::copy(v.begin(), v.end(), f.data<float>());
  if (dtype == DType::F32) return f;
  Tensor t = Tensor::zeros(shape, dtype);
  kernels::cast(f, t);
  return t;
}

Tensor from_ints(const std::vector<int32_t>& v, const Shape& shape) {
  Tensor t = Tensor::zeros(shape, DType::I32);
  EXPECT_EQ(static_cast<int64_t>(v.size()), t.numel());
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}

std::vector<double> to_f64(const Tensor& t) {
  Tensor f = Tensor::zeros(t.shape(), DType::F32);
  kernels::cast(t, f);
  return std::vector<double>(f.data<float>(), f.data<float>() + f.numel());
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double atol, double rtol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t worst = 0;
  double worst_excess = -1;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double tol = atol + rtol * std::fabs(want[i]);
    double err = std::fabs(got[i] - want[i]);
    bool ok = err <= tol || (std::isnan(got[i]) && std::isnan(want[i]));
    if (!ok) ++bad;
    if (!ok && err - tol > worst_excess) {
      worst_excess = err - tol;
      worst = i;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements off; worst at " << worst
                    << ": got " << got[worst] << ", want " << want[worst] << " (atol " << atol << ", rtol "
                    << rtol << ")";
}

TokenBatch random_token_batch(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  TokenBatch b{Tensor::zeros({B, T}, DType::I32), Tensor::zeros({B, T}, DType::I32)};
  CounterRng rng(seed, "tokens");
  for (int64_t r = 0; r < B; ++r)
    for (int64_t t = 0; t < T; ++t) {
      b.in.data<int32_t>()[r * T + t] = static_cast<int32_t>(rng.bits(r * (T + 1) + t) % V);
      b.tg.data<int32_t>()[r * T + t] = static_cast<int32_t>(rng.bits(r * (T + 1) + t + 1) % V);
    }
  return b;
}

double central_diff(float* v, float eps, const std::function<double()>& f) {
  const float keep = *v;
  *v = keep + eps;
  const float hi = *v;
  const double lp = f();
  *v = keep - eps;
  const float lo = *v;
  const double lm = f();
  *v = keep;
  return (lp - lm) / (static_cast<double>(hi) - lo);
}

std::vector<double> finite_diff(const std::function<double(const std::vector<double>&)>& f,
                                std::vector<double> x, double eps) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double keep = x[i];
    x[i] = keep + eps;
    double up = f(x);
    x[i] = keep - eps;
    double down = f(x);
    x[i] = keep;
    g[i] = (up - down) / (2 * eps);
  }
  return g;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace dt::test
