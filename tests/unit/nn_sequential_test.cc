// nn::Sequential: gradients of every layer kind against finite differences, equality with
// the MLP model it can spell, and the width checks made while the network is built.
#include "nn/loss.h"
#include "nn/mlp_model.h"
#include "nn/sequential.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

TEST(NNSequential, GradientsMatchFiniteDifferences) {
  nn::Sequential s(/*seed=*/3, /*init_std=*/0.4f);
  s.add_linear(5, 12, true);
  s.add_norm(nn::NormKind::LayerNorm, 12);
  s.add_activation(nn::MLPAct::GELU);
  s.add_linear(12, 8, false);
  s.add_norm(nn::NormKind::RMSNorm, 8);
  s.add_activation(nn::MLPAct::SiLU);
  s.add_linear(8, 3, true);
  for (nn::Parameter* p : s.parameters())  // norms and biases away from 1 and 0
    if (p->value.ndim() == 1) p->value = test::randn(p->value.shape(), DType::F32, 8, p->name, 0.3f);
  Tensor x = test::randn({6, 5}, DType::F32, 1, "x"), y = test::randn({6, 3}, DType::F32, 1, "y");
  nn::MSEState st;
  s.zero_grad();
  double loss0 = nn::mse_loss(s.forward(x), y, st);
  Tensor dy, dx;
  nn::mse_loss_backward(st, dy);
  s.backward(dy, &dx);
  ASSERT_GT(loss0, 0.1);
  // f32 forward, double central differences with step 1e-2 (as the MLP test): rounding
  // ~1e-7 / 2e-2 and truncation ~1e-4 relative, so atol 2e-4 + rtol 2e-2.
  auto loss = [&] {
    nn::MSEState fs;
    return nn::mse_loss(s.forward(x), y, fs);
  };
  auto check = [&](Tensor value, const Tensor& grad, const std::string& what) {
    std::vector<double> got = test::to_f64(grad), want;
    for (int64_t i = 0; i < value.numel(); ++i) {
      want.push_back(test::central_diff(value.data<float>() + i, 1e-2f, loss));
    }
    test::expect_close(got, want, 2e-4, 2e-2, what);
  };
  for (nn::Parameter* p : s.parameters()) check(p->value, p->grad, p->name);
  check(x, dx, "dx");
}

TEST(NNSequential, SpellsTheMLPModelBitwise) {
  nn::MLPConfig c;
  c.sizes = {4, 16, 2};
  c.act = nn::MLPAct::SiLU;
  c.seed = 5;
  nn::MLPModel mlp(c);
  nn::Sequential s(9);
  s.add_linear(4, 16, true);
  s.add_activation(nn::MLPAct::SiLU);
  s.add_linear(16, 2, true);
  nn::ParamList a = mlp.parameters(), b = s.parameters();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(b[0]->name, "0.weight");
  EXPECT_EQ(b[2]->name, "2.weight");
  for (size_t i = 0; i < a.size(); ++i) kernels::cast(a[i]->value, b[i]->value);  // same values
  Tensor x = test::randn({3, 4}), dy = test::randn({3, 2}, DType::F32, 2, "dy");
  nn::MLPModel::Acts acts;
  EXPECT_TRUE(test::same_bits(mlp.forward(x, acts), s.forward(x)));
  Tensor dx1, dx2;
  mlp.zero_grad();
  s.zero_grad();
  mlp.backward(dy, acts, &dx1);
  s.backward(dy, &dx2);
  EXPECT_TRUE(test::same_bits(dx1, dx2));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(test::same_bits(a[i]->grad, b[i]->grad)) << b[i]->name;
}

TEST(NNSequential, WidthsMustChain) {
  nn::Sequential s(1);
  s.add_linear(4, 8, true);
  test::expect_invalid([&] { s.add_linear(7, 2, true); }, "takes width 7 but the layers before it give 8");
  test::expect_invalid([&] { s.add_norm(nn::NormKind::RMSNorm, 3); }, "takes width 3");
  test::expect_invalid([&] { s.forward(test::randn({2, 5})); }, "expected f32 [N, 4]");
  test::expect_invalid([&] { s.backward(test::randn({2, 8}), nullptr); }, "call forward first");
  s.forward(test::randn({2, 4}));
  test::expect_invalid([&] { s.backward(test::randn({2, 7}), nullptr); }, "dy: expected f32 [2, 8]");
}

}  // namespace
}  // namespace dt
