// MLPModel with the MSE loss: gradients against finite differences, memorizing a small
// regression set with SGD, and config validation.
#include <cmath>
#include <cstdio>

#include "nn/loss.h"
#include "nn/mlp_model.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

using nn::MLPConfig;
using nn::MLPModel;

MLPConfig config(nn::MLPAct act) {
  MLPConfig c;
  c.sizes = {5, 16, 12, 3};
  c.act = act;
  c.init_std = 0.4f;  // ~1/sqrt(fan_in): signals neither vanish nor explode
  c.seed = 4;
  return c;
}

TEST(NNMLP, GradientsMatchFiniteDifferences) {
  for (nn::MLPAct act : {nn::MLPAct::GELU, nn::MLPAct::SiLU}) {
    MLPModel m(config(act));
    // Non-zero biases so their gradients flow through a non-trivial point.
    for (nn::Parameter* p : m.parameters())
      if (p->value.ndim() == 1) p->value = test::randn(p->value.shape(), DType::F32, 8, p->name, 0.2f);
    Tensor x = test::randn({7, 5}, DType::F32, 1, "x"), y = test::randn({7, 3}, DType::F32, 1, "y");
    MLPModel::Acts a;
    nn::MSEState s;
    m.zero_grad();
    m.forward(x, a);
    double loss0 = nn::mse_loss(a.z.back(), y, s);
    Tensor dy, dx;
    nn::mse_loss_backward(s, dy);
    m.backward(dy, a, &dx);
    ASSERT_GT(loss0, 0.1);
    // f32 forward, double central differences with step 1e-2 (the stored step is used):
    // rounding noise ~1e-7 / 2e-2, truncation ~1e-4 relative; atol 1e-4 + rtol 1e-2.
    MLPModel::Acts fa;
    nn::MSEState fs;
    auto loss = [&] {
      m.forward(x, fa);
      return nn::mse_loss(fa.z.back(), y, fs);
    };
    auto check = [&](Tensor value, const Tensor& grad, const std::string& what) {
      std::vector<double> got, want;
      for (int64_t i = 0; i < value.numel(); ++i) {
        got.push_back(grad.data<float>()[i]);
        want.push_back(test::central_diff(value.data<float>() + i, 1e-2f, loss));
      }
      test::expect_close(got, want, 1e-4, 1e-2, what);
    };
    for (nn::Parameter* p : m.parameters()) check(p->value, p->grad, p->name);
    check(x, dx, "dx");
  }
}

TEST(NNMLP, MemorizesARegressionSetWithSGD) {
  MLPConfig c = config(nn::MLPAct::SiLU);
  c.sizes = {4, 32, 32, 2};
  c.init_std = 0.3f;
  MLPModel m(c);
  Tensor x = test::randn({8, 4}, DType::F32, 2, "x"), y = test::randn({8, 2}, DType::F32, 2, "y", 0.5f);
  MLPModel::Acts a;
  nn::MSEState s;
  Tensor dy;
  double first = 0, loss = 0;
  for (int step = 0; step < 2000; ++step) {
    m.zero_grad();
    loss = nn::mse_loss(m.forward(x, a), y, s);
    if (step == 0) first = loss;
    nn::mse_loss_backward(s, dy);
    m.backward(dy, a);
    for (nn::Parameter* p : m.parameters()) {
      float* v = p->value.data<float>();
      const float* g = p->grad.data<float>();
      for (int64_t i = 0; i < p->value.numel(); ++i) v[i] -= 0.1f * g[i];
    }
  }
  std::printf("MLP 4-32-32-2: mse %.4g -> %.4g after 2000 SGD steps\n", first, loss);
  EXPECT_LT(loss, 1e-3 * first);
}

TEST(NNMLP, MSEValueAndNamesAndBadConfigs) {
  nn::MSEState s;
  Tensor p = test::from_vec({1, 2, 3, 4}, {2, 2}), t = test::from_vec({1, 0, 3, 2}, {2, 2});
  EXPECT_DOUBLE_EQ(nn::mse_loss(p, t, s), (4.0 + 4.0) / 4);
  Tensor d;
  nn::mse_loss_backward(s, d, 0.5f);
  test::expect_close(test::to_f64(d), {0, 0.5, 0, 0.5}, 0, 0, "dpred = 0.5 * 2 (p - t) / 4");

  MLPModel m(config(nn::MLPAct::GELU));
  std::vector<std::string> names;
  for (nn::Parameter* q : m.parameters()) names.push_back(q->name);
  EXPECT_EQ(names, (std::vector<std::string>{"layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
                                             "layers.2.weight", "layers.2.bias"}));
  EXPECT_EQ(m.num_parameters(), 5 * 16 + 16 + 16 * 12 + 12 + 12 * 3 + 3);

  MLPConfig bad;
  bad.sizes = {4};
  test::expect_invalid([&] { MLPModel x(bad); }, "sizes");
  bad.sizes = {4, 0, 2};
  test::expect_invalid([&] { MLPModel x(bad); }, "sizes[1]");
  MLPModel::Acts a;
  test::expect_invalid([&] { m.forward(test::randn({3, 4}), a); }, "x");
  test::expect_invalid([&] { nn::mse_loss(p, test::randn({4}), s); }, "mse");
}

}  // namespace
}  // namespace dt
