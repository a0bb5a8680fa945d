// Whole-model gradients of a tiny GPT against central finite differences, activation
// checkpointing against none (bitwise), and accumulation over micro-batches.
#include <cmath>
#include <cstdio>

#include "core/random_fill.h"
#include "nn/gpt.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

using nn::GPT;
using nn::GPTActs;
using nn::GPTConfig;

GPTConfig tiny(bool llama_style) {
  GPTConfig c;
  c.vocab_size = 11;
  c.context = 8;
  c.n_layer = 2;
  c.d_model = 8;
  c.n_head = 2;
  c.d_ff = 16;
  c.seed = 7;
  if (llama_style) {  // rmsnorm + swiglu + rope + GQA with one kv head, untied, no biases
    c = c.llama_style();
    c.n_kv_head = 1;
  }
  return c;
}

// The default init (std 0.02, residual projections smaller) makes most gradients ~1e-4, where
// an f32 finite difference says little. Larger values make every path matter: weights
// N(0, 0.4), biases N(0, 0.1), norm weights 1 + N(0, 0.1).
void perturb_init(GPT& m) {
  for (nn::Parameter* p : m.parameters()) {
    bool vec = p->value.ndim() == 1;
    fill_random(p->value, Distribution::Normal, 99, p->name, 0, 0.0f, vec ? 0.1f : 0.4f);
    if (p->init == nn::Parameter::Init::Ones)
      for (int64_t i = 0; i < p->value.numel(); ++i) p->value.data<float>()[i] += 1.0f;
  }
}

struct Batch {
  Tensor ids, targets;
};

// B = 2 sequences of T = 8 tokens; one target ignored (-1) to exercise the mean's denominator.
Batch batch(int64_t vocab) {
  std::vector<int32_t> ids(16), tg(16);
  for (int i = 0; i < 16; ++i) {
    ids[i] = (i * 7 + 3) % static_cast<int>(vocab);
    tg[i] = (i * 5 + 1) % static_cast<int>(vocab);
  }
  tg[5] = -1;
  return {test::from_ints(ids, {2, 8}), test::from_ints(tg, {2, 8})};
}

// Up to n indices spread over [0, numel).
std::vector<int64_t> sample(int64_t numel, int64_t n = 20) {
  std::vector<int64_t> out;
  int64_t step = std::max<int64_t>(1, numel / n);
  for (int64_t i = (step / 2) % numel; i < numel && static_cast<int64_t>(out.size()) < n; i += step) out.push_back(i);
  return out;
}

void check_gradients(const GPTConfig& c) {
  GPT m(c);
  perturb_init(m);
  Batch b = batch(m.config().vocab_size);
  GPTActs a;
  m.zero_grad();
  double loss = m.forward_loss(b.ids, b.targets, a);
  m.backward(a);
  ASSERT_TRUE(std::isfinite(loss));
  Tensor dx0 = test::converted(a.dresid, DType::F32);  // d loss / d (embedding output)

  // Step 1e-2 on values of size ~0.4 keeps the f32 rounding of the loss (~1e-7 of ~3) to
  // ~1e-5 in the quotient; the truncation error (~eps^2 * f''') stays below the tolerances:
  // atol 1e-3 + rtol 2e-2, against gradients whose sampled magnitudes reach ~0.1 to 1.
  const float eps = 1e-2f;
  const double atol = 1e-3, rtol = 2e-2;
  GPTActs fa;
  auto loss_fn = [&] { return m.forward_loss(b.ids, b.targets, fa); };
  double biggest = 0;
  int checked = 0;
  for (nn::Parameter* p : m.parameters()) {
    std::vector<double> got, want;
    for (int64_t i : sample(p->value.numel())) {
      got.push_back(p->grad.data<float>()[i]);
      want.push_back(test::central_diff(p->value.data<float>() + i, eps, loss_fn));
      biggest = std::max(biggest, std::fabs(got.back()));
    }
    test::expect_close(got, want, atol, rtol, p->name);
    checked += static_cast<int>(got.size());
  }
  // The gradient of the embedding output, through the block-range pieces.
  std::vector<double> got, want;
  for (int64_t i : sample(dx0.numel(), 40)) {
    m.embed(b.ids, fa);
    float* v = fa.resid[0].data<float>() + i;
    got.push_back(dx0.data<float>()[i]);
    want.push_back(test::central_diff(v, eps, [&] {
      m.forward_blocks(0, m.num_blocks(), fa);
      m.head(fa);
      return nn::cross_entropy_loss(fa.logits, b.targets, -1, fa.ce);
    }));
  }
  test::expect_close(got, want, atol, rtol, "d loss / d embeddings");
  std::printf("%s: %d parameter entries + %zu embedding entries checked; largest |grad| %.3g\n",
              m.config().str().c_str(), checked, got.size(), biggest);
}

TEST(NNGPTGrad, LayerNormGeluLearnedTiedMatchesFiniteDifferences) { check_gradients(tiny(false)); }
TEST(NNGPTGrad, RMSNormSwiGLURoPEGQAUntiedMatchesFiniteDifferences) { check_gradients(tiny(true)); }
// The remaining combination of paths: biases sliced out of the fused SwiGLU and GQA weights.
TEST(NNGPTGrad, LayerNormSwiGLURoPEGQAWithBiasesMatchesFiniteDifferences) {
  GPTConfig c = tiny(true);
  c.norm = nn::NormKind::LayerNorm;
  c.bias = true;
  c.tied_embeddings = true;
  check_gradients(c);
}

// grads of one forward/backward with checkpointing on or off.
std::vector<Tensor> grads_of(bool llama_style, bool checkpoint) {
  GPTConfig c = tiny(llama_style);
  c.checkpoint = checkpoint;
  GPT m(c);
  perturb_init(m);
  Batch b = batch(c.vocab_size);
  GPTActs a;
  m.forward_loss(b.ids, b.targets, a);
  m.backward(a);
  std::vector<Tensor> out;
  for (nn::Parameter* p : m.parameters()) out.push_back(test::converted(p->grad, DType::F32));
  out.push_back(test::converted(a.dresid, DType::F32));
  return out;
}

TEST(NNGPTGrad, CheckpointingGivesBitwiseIdenticalGradients) {
  for (bool llama : {false, true}) {
    std::vector<Tensor> plain = grads_of(llama, false), ckpt = grads_of(llama, true);
    ASSERT_EQ(plain.size(), ckpt.size());
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(test::same_bits(plain[i], ckpt[i])) << "tensor " << i;
  }
}

TEST(NNGPTGrad, GradientsDoNotDependOnTheThreadCount) {
  std::vector<Tensor> one, two;
  {
    test::KernelThreads t(1);
    one = grads_of(true, false);
  }
  {
    test::KernelThreads t(2);
    two = grads_of(true, false);
  }
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(test::same_bits(one[i], two[i])) << "tensor " << i;
}

TEST(NNGPTGrad, GradientsAccumulateOverMicroBatches) {
  GPT m(tiny(true));
  perturb_init(m);
  Batch b = batch(11);
  GPTActs a;
  m.forward_loss(b.ids, b.targets, a);
  m.backward(a);
  std::vector<std::vector<double>> once;
  for (nn::Parameter* p : m.parameters()) once.push_back(test::to_f64(p->grad));
  m.forward_loss(b.ids, b.targets, a);
  m.backward(a);
  size_t k = 0;
  for (nn::Parameter* p : m.parameters()) {
    std::vector<double> twice = once[k++];
    for (double& v : twice) v *= 2;
    test::expect_close(test::to_f64(p->grad), twice, 1e-6, 1e-5, p->name);
  }
  m.zero_grad();
  for (nn::Parameter* p : m.parameters()) EXPECT_EQ(kernels::sum_squares(p->grad), 0.0) << p->name;
}

}  // namespace
}  // namespace dt
