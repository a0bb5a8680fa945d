// The pieces under the GPT: RoPE's algebra, Linear against a double reference and its
// accumulating grads, and how activations are kept (tag, reuse, checkpointing).
#include <cmath>

#include "nn/gpt.h"
#include "nn/rope.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

TEST(NNRope, RotationIsInvertibleNormPreservingAndIdentityAtZero) {
  Tensor x = test::randn({2, 5, 3, 8}, DType::F32, 3, "x");
  Tensor y = test::converted(x, DType::F32);
  nn::rope_forward(y, 10000.0f);
  // Position 0 is not rotated.
  for (int64_t i = 0; i < 3 * 8; ++i) EXPECT_EQ(y.data<float>()[i], x.data<float>()[i]);
  // Each pair (i, i + 4) keeps its length.
  std::vector<double> xv = test::to_f64(x), yv = test::to_f64(y);
  for (int64_t r = 0; r < x.numel() / 8; ++r)
    for (int i = 0; i < 4; ++i) {
      double a = std::hypot(xv[r * 8 + i], xv[r * 8 + i + 4]), b = std::hypot(yv[r * 8 + i], yv[r * 8 + i + 4]);
      EXPECT_NEAR(a, b, 1e-5 * (1 + a));
    }
  nn::rope_backward(y, 10000.0f);  // the transpose of a rotation is its inverse
  test::expect_close(test::to_f64(y), xv, 1e-6, 1e-5, "rope_backward(rope_forward(x))");
  Tensor odd = test::randn({1, 2, 1, 5});
  test::expect_invalid([&] { nn::rope_forward(odd, 10000.0f); }, "even");
}

TEST(NNRope, ScoresDependOnlyOnTheRelativePosition) {
  // The same q at every position and the same k at every position: after RoPE, q_m . k_n is
  // a function of m - n alone, which is why RoPE encodes relative positions.
  const int64_t T = 8, D = 6;
  Tensor q0 = test::randn({D}, DType::F32, 1, "q"), k0 = test::randn({D}, DType::F32, 1, "k");
  Tensor q = Tensor::zeros({1, T, 1, D}, DType::F32), k = Tensor::zeros({1, T, 1, D}, DType::F32);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t d = 0; d < D; ++d) {
      q.data<float>()[t * D + d] = q0.data<float>()[d];
      k.data<float>()[t * D + d] = k0.data<float>()[d];
    }
  nn::rope_forward(q, 100.0f);
  nn::rope_forward(k, 100.0f);
  auto score = [&](int64_t m, int64_t n) {
    double s = 0;
    for (int64_t d = 0; d < D; ++d) s += q.data<float>()[m * D + d] * double(k.data<float>()[n * D + d]);
    return s;
  };
  EXPECT_NEAR(score(3, 1), score(7, 5), 1e-5);
  EXPECT_NEAR(score(4, 4), score(0, 0), 1e-5);
  EXPECT_GT(std::fabs(score(3, 1) - score(3, 0)), 1e-3);  // ...and it does depend on it
}

// Loading weights skips the random draw (ScopedSkipParamInit); the scope nests and ends
// cleanly: a parameter made after it is drawn exactly as one made before it, and grads are
// zeroed either way.
TEST(NNParams, SkipInitScopeNestsAndRestores) {
  auto make = [] { return nn::make_param("w", {64, 8}, nn::Parameter::Init::Normal, 0.02f, 7, DType::F32); };
  const nn::Parameter before = make();
  {
    nn::ScopedSkipParamInit outer;
    {
      nn::ScopedSkipParamInit inner;
    }
    const nn::Parameter skipped = make();
    EXPECT_EQ(skipped.value.shape(), before.value.shape());
    EXPECT_TRUE(test::same_bits(skipped.grad, before.grad));  // zeros
  }
  const nn::Parameter after = make();
  EXPECT_TRUE(test::same_bits(after.value, before.value));
  const std::vector<double> v = test::to_f64(before.value);
  EXPECT_GT(std::abs(v[0]) + std::abs(v[1]), 0.0);  // drawn, not left at zero
}

TEST(NNLinear, MatchesReferenceAndGradsAccumulate) {
  nn::Linear lin("fc", 4, 3, true, 5, 0.5f);
  lin.bias.value = test::randn({3}, DType::F32, 5, "b");
  Tensor x = test::randn({2, 2, 4}, DType::F32, 6, "x"), dy = test::randn({4, 3}, DType::F32, 6, "dy");
  Tensor y, dx;
  lin.forward(x, y);
  std::vector<double> xv = test::to_f64(x), w = test::to_f64(lin.weight.value), b = test::to_f64(lin.bias.value);
  std::vector<double> want(12), dw(12, 0.0), dyv = test::to_f64(dy);
  for (int r = 0; r < 4; ++r)
    for (int o = 0; o < 3; ++o) {
      want[r * 3 + o] = b[o];
      for (int i = 0; i < 4; ++i) want[r * 3 + o] += xv[r * 4 + i] * w[o * 4 + i];  // weight [out, in]
    }
  test::expect_close(test::to_f64(y), want, 1e-6, 1e-5, "y = x W^T + b");
  for (int r = 0; r < 4; ++r)
    for (int o = 0; o < 3; ++o)
      for (int i = 0; i < 4; ++i) dw[o * 4 + i] += dyv[r * 3 + o] * xv[r * 4 + i];
  dx = Tensor::zeros(x.shape(), DType::F32);
  lin.backward(x, dy, dx);
  test::expect_close(test::to_f64(lin.weight.grad), dw, 1e-6, 1e-5, "dW = dy^T x");
  lin.backward(x, dy, dx);
  for (double& v : dw) v *= 2;
  test::expect_close(test::to_f64(lin.weight.grad), dw, 1e-6, 1e-5, "dW after two backwards");
}

TEST(NNActivations, AreTaggedReusedAndDroppedByCheckpointing) {
  nn::GPTConfig c;
  c.vocab_size = 11;
  c.context = 8;
  c.n_layer = 2;
  c.d_model = 8;
  c.n_head = 2;
  nn::GPT m(c);
  Tensor ids = test::from_ints({1, 2, 3, 4, 5, 6}, {2, 3});
  nn::GPTActs a;
  m.forward(ids, a);
  EXPECT_EQ(a.logits.storage()->tag(), MemTag::Activation);
  EXPECT_EQ(a.blocks[1].ffn.mlp.a.storage()->tag(), MemTag::Activation);
  const void* logits = a.logits.raw();
  const void* inner = a.blocks[1].attn.q.raw();
  m.forward(ids, a);  // same shape: same buffers
  EXPECT_EQ(a.logits.raw(), logits);
  EXPECT_EQ(a.blocks[1].attn.q.raw(), inner);

  m.set_checkpointing(true);
  nn::GPTActs ck;
  m.forward(ids, ck);
  EXPECT_TRUE(test::same_bits(ck.logits, a.logits));
  ASSERT_EQ(ck.blocks.size(), 2u);
  EXPECT_FALSE(ck.blocks[0].ffn.mlp.a.defined());  // only the block inputs resid[i] are kept
  EXPECT_TRUE(ck.resid[1].defined());
}

}  // namespace
}  // namespace dt
