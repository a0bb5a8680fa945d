// Cross-entropy against a double-precision reference, its gradient against finite differences.
#include <cmath>
#include <cstring>

#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

using Vec = std::vector<double>;
constexpr int32_t kIgnore = -100;

// Per-row -log softmax(x)[t], 0 where t is ignored.
Vec ce_ref(const Vec& x, const std::vector<int32_t>& t, int64_t v, int32_t ignore = kIgnore) {
  Vec loss(t.size());
  for (size_t r = 0; r < t.size(); ++r) {
    if (t[r] == ignore) continue;
    double mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < v; ++j) mx = std::max(mx, x[r * v + j]);
    for (int64_t j = 0; j < v; ++j) s += std::exp(x[r * v + j] - mx);
    loss[r] = std::log(s) + mx - x[r * v + t[r]];
  }
  return loss;
}

const std::vector<int32_t> kTargets = {3, kIgnore, 0, 10, 7, kIgnore};

TEST(CrossEntropy, ForwardMatchesReferenceWithIgnoredRows) {
  Tensor x = test::randn({6, 11}, DType::F32, 2, "x", 3.0f), loss = Tensor::zeros({6}, DType::F32);
  loss.data<float>()[1] = 5.0f;  // an ignored row is overwritten with 0
  kernels::cross_entropy_forward(x, test::from_ints(kTargets, {6}), kIgnore, loss);
  test::expect_close(test::to_f64(loss), ce_ref(test::to_f64(x), kTargets, 11), 1e-6, 1e-5, "losses");
  EXPECT_EQ(loss.data<float>()[1], 0.0f);
}

// Logits of 1e4 overflow a naive exp; the max-subtracted form stays exact to f32 rounding.
TEST(CrossEntropy, StableForHugeLogits) {
  std::vector<float> xv = {1e4f, 0.0f, -1e4f, 1e4f, 1e4f - 1.0f, 3.0f};
  std::vector<int32_t> t = {1, 0};
  Tensor x = test::from_vec(xv, {2, 3}), loss = Tensor::zeros({2}, DType::F32);
  kernels::cross_entropy_forward(x, test::from_ints(t, {2}), kIgnore, loss);
  test::expect_close(test::to_f64(loss), ce_ref(test::to_f64(x), t, 3), 1e-5, 1e-6, "huge logits");
  Tensor dl = test::from_vec({1.0f, 1.0f}, {2}), dx = Tensor::zeros({2, 3}, DType::F32);
  kernels::cross_entropy_backward(x, test::from_ints(t, {2}), dl, kIgnore, dx);
  for (double g : test::to_f64(dx)) EXPECT_TRUE(std::isfinite(g));
  EXPECT_NEAR(dx.data<float>()[1], -1.0, 1e-6);  // softmax of the non-max logit is ~0
}

// dlogits against central differences of dot(losses, dlosses); ignored rows get zero.
TEST(CrossEntropy, BackwardMatchesFiniteDifferences) {
  const int64_t v = 11;
  Tensor x = test::randn({6, v}, DType::F32, 4, "x", 2.0f), dl = test::randn({6}, DType::F32, 4, "dl");
  Tensor dx = test::from_vec(std::vector<float>(6 * v, 9.0f), {6, v});  // overwritten, not accumulated
  kernels::cross_entropy_backward(x, test::from_ints(kTargets, {6}), dl, kIgnore, dx);
  Vec dlv = test::to_f64(dl);
  Vec want = test::finite_diff([&](const Vec& xv) { return test::dot(ce_ref(xv, kTargets, v), dlv); },
                               test::to_f64(x));
  test::expect_close(test::to_f64(dx), want, 1e-5, 1e-4, "dlogits");
  for (int64_t j = 0; j < v; ++j) EXPECT_EQ(dx.data<float>()[1 * v + j], 0.0f);
}

// bf16/f16 logits compute in f32: loss to f32 accuracy of the rounded inputs; dlogits to
// the storage precision.
TEST(CrossEntropy, HalfPrecisionLogits) {
  for (DType t : {DType::BF16, DType::F16}) {
    Tensor x = test::randn({6, 11}, t, 5, "x"), loss = Tensor::zeros({6}, DType::F32);
    kernels::cross_entropy_forward(x, test::from_ints(kTargets, {6}), kIgnore, loss);
    test::expect_close(test::to_f64(loss), ce_ref(test::to_f64(x), kTargets, 11), 1e-5, 1e-5, dtype_name(t));
    Tensor dl = test::randn({6}, DType::F32, 5, "dl"), dx = Tensor::zeros({6, 11}, t);
    Tensor dx32 = Tensor::zeros({6, 11}, DType::F32), x32 = Tensor::zeros({6, 11}, DType::F32);
    kernels::cast(x, x32);
    kernels::cross_entropy_backward(x, test::from_ints(kTargets, {6}), dl, kIgnore, dx);
    kernels::cross_entropy_backward(x32, test::from_ints(kTargets, {6}), dl, kIgnore, dx32);
    test::expect_close(test::to_f64(dx), test::to_f64(dx32), 1e-3, 1e-2, std::string("dlogits ") + dtype_name(t));
  }
}

TEST(CrossEntropy, BitwiseIdenticalForOneAndTwoThreads) {
  int keep = kernel_threads();
  std::vector<int32_t> t(64);
  for (int i = 0; i < 64; ++i) t[i] = (i * 37) % 300;
  Tensor x = test::randn({64, 300}, DType::F32, 6, "x"), dl = test::randn({64}, DType::F32, 6, "dl");
  Tensor tg = test::from_ints(t, {64});
  Tensor l[2] = {Tensor::zeros({64}, DType::F32), Tensor::zeros({64}, DType::F32)};
  Tensor d[2] = {Tensor::zeros({64, 300}, DType::F32), Tensor::zeros({64, 300}, DType::F32)};
  for (int i = 0; i < 2; ++i) {
    set_kernel_threads(i + 1);
    kernels::cross_entropy_forward(x, tg, kIgnore, l[i]);
    kernels::cross_entropy_backward(x, tg, dl, kIgnore, d[i]);
  }
  set_kernel_threads(keep);
  EXPECT_EQ(std::memcmp(l[0].raw(), l[1].raw(), l[0].nbytes()), 0);
  EXPECT_EQ(std::memcmp(d[0].raw(), d[1].raw(), d[0].nbytes()), 0);
}

using test::expect_invalid;

TEST(CrossEntropy, RejectsBadTargetsBeforeWriting) {
  Tensor x = test::randn({3, 5}), loss = test::from_vec({7, 7, 7}, {3});
  Tensor t = test::from_ints({1, 2, 5}, {3}), dl = test::from_vec({1, 1, 1}, {3});
  Tensor dx = Tensor::zeros({3, 5}, DType::F32);
  expect_invalid([&] { kernels::cross_entropy_forward(x, t, kIgnore, loss); },
                 "targets[2] is 5; accepted: [0, 5) or ignore_index -100");
  for (double l : test::to_f64(loss)) EXPECT_EQ(l, 7.0);  // untouched
  Tensor neg = test::from_ints({-1, 2, 3}, {3});
  expect_invalid([&] { kernels::cross_entropy_backward(x, neg, dl, kIgnore, dx); }, "targets[0] is -1");
  for (double g : test::to_f64(dx)) EXPECT_EQ(g, 0.0);
  Tensor t64 = Tensor::zeros({3}, DType::I64);
  expect_invalid([&] { kernels::cross_entropy_forward(x, t64, kIgnore, loss); }, "targets has dtype i64");
  Tensor l16 = Tensor::zeros({3}, DType::BF16);
  expect_invalid([&] { kernels::cross_entropy_forward(x, t, kIgnore, l16); }, "losses has dtype bf16");
  Tensor x3 = Tensor::zeros({3, 5, 1}, DType::F32);
  expect_invalid([&] { kernels::cross_entropy_forward(x3, t, kIgnore, loss); }, "logits has shape [3, 5, 1]");
}

}  // namespace
}  // namespace dt
