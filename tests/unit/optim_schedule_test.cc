// LR schedules at known steps, global-norm clipping (exact scaling, the all-reduce hook,
// Inf), and the dynamic loss scaler's skip / back-off / growth sequence with planted Inf.
#include <cmath>
#include <limits>
#include <memory>

#include "optim/clip.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

TEST(OptimSchedule, ConstantAndWarmupCosineAtKnownSteps) {
  auto c = optim::LrSchedule::constant(3e-4f);
  EXPECT_EQ(c.lr(0), 3e-4f);
  EXPECT_EQ(c.lr(123456), 3e-4f);
  auto s = optim::LrSchedule::warmup_cosine(1.0f, 10, 110, 0.1f);
  EXPECT_FLOAT_EQ(s.lr(0), 0.1f);  // (0 + 1) / 10
  EXPECT_FLOAT_EQ(s.lr(4), 0.5f);
  EXPECT_FLOAT_EQ(s.lr(9), 1.0f);   // warmup ends at the base
  EXPECT_FLOAT_EQ(s.lr(10), 1.0f);  // cosine starts at the base
  EXPECT_FLOAT_EQ(s.lr(60), 0.55f);  // halfway: r + (1 - r) / 2
  EXPECT_FLOAT_EQ(s.lr(35), float(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI / 4))));
  EXPECT_FLOAT_EQ(s.lr(110), 0.1f);  // the floor, and it stays there
  EXPECT_FLOAT_EQ(s.lr(1000), 0.1f);
  for (int64_t i = 10; i < 110; ++i) EXPECT_LE(s.lr(i + 1), s.lr(i));
  auto no_warmup = optim::LrSchedule::warmup_cosine(2.0f, 0, 4, 0.0f);
  EXPECT_FLOAT_EQ(no_warmup.lr(0), 2.0f);
  EXPECT_FLOAT_EQ(no_warmup.lr(2), 1.0f);
  EXPECT_NEAR(no_warmup.lr(4), 0.0f, 1e-7);
  test::expect_invalid([] { optim::LrSchedule::warmup_cosine(1.0f, 10, 5, 0.1f); }, "warmup_steps");
  test::expect_invalid([] { optim::LrSchedule::warmup_cosine(1.0f, 0, 5, 1.5f); }, "min_ratio");
}

struct Grads {
  std::vector<std::unique_ptr<nn::Parameter>> owned;
  nn::ParamList list;
  Grads(DType dtype = DType::F32) {
    // grads 3,4 (norm 5) and 12 (norm 12): global norm 13.
    add({3.0f, 4.0f}, dtype), add({12.0f, 0.0f, 0.0f}, dtype);
  }
  void add(const std::vector<float>& g, DType dtype) {
    auto p = std::make_unique<nn::Parameter>();
    p->name = "p" + std::to_string(owned.size());
    int64_t n = static_cast<int64_t>(g.size());
    p->value = Tensor::zeros({n}, dtype);
    p->grad = test::from_vec(g, {n}, dtype);
    list.push_back(p.get());
    owned.push_back(std::move(p));
  }
};

TEST(OptimClip, ScalesToMaxNormExactlyAndLeavesSmallGrads) {
  Grads g;
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm(g.list, 6.5), 13.0);
  EXPECT_NEAR(optim::global_grad_norm(g.list), 6.5, 6.5 * 1e-7);
  test::expect_close(test::to_f64(g.list[0]->grad), {1.5, 2.0}, 0, 1e-7, "clipped p0");
  test::expect_close(test::to_f64(g.list[1]->grad), {6.0, 0.0, 0.0}, 0, 1e-7, "clipped p1");
  Grads below;
  Tensor keep0 = test::converted(below.list[0]->grad, DType::F32);
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm(below.list, 13.0), 13.0);  // at the limit: untouched
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm(below.list, 100.0), 13.0);
  EXPECT_TRUE(test::same_bits(below.list[0]->grad, keep0));
  EXPECT_EQ(optim::clip_coefficient(13.0, 6.5), 0.5f);
  EXPECT_EQ(optim::clip_coefficient(std::numeric_limits<double>::infinity(), 1.0), 1.0f);
  test::expect_invalid([&] { optim::clip_grad_norm(below.list, 0.0); }, "max_norm");
}

// The hook sees the local squared sum: two ranks holding equal shards make it 2 * 169.
TEST(OptimClip, ReduceHookMakesTheNormGlobal) {
  Grads g(DType::BF16);
  double seen = 0;
  double norm = optim::global_grad_norm(g.list, [&](double& sq) { seen = sq; sq *= 2; });
  EXPECT_DOUBLE_EQ(seen, 169.0);
  EXPECT_DOUBLE_EQ(norm, std::sqrt(338.0));
}

TEST(OptimClip, InfGradientGivesInfNormAndNoScaling) {
  Grads g;
  g.list[1]->grad.data<float>()[2] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isinf(optim::clip_grad_norm(g.list, 1.0)));
  EXPECT_EQ(g.list[0]->grad.data<float>()[0], 3.0f);
}

TEST(OptimLossScaler, SkipBackoffGrowthSequence) {
  optim::LossScalerOptions o;
  o.growth_interval = 3;
  optim::DynamicLossScaler s(o);
  EXPECT_EQ(s.scale(), 65536.0f);
  // good good good -> grows; good Inf -> skips and halves; the good-step count restarts.
  std::vector<bool> infs = {false, false, false, false, true, false, false, false};
  std::vector<float> scales = {65536, 65536, 131072, 131072, 65536, 65536, 65536, 131072};
  std::vector<bool> skips = {false, false, false, false, true, false, false, false};
  std::vector<float> unscales = {1 / 65536.f, 1 / 65536.f, 1 / 65536.f, 1 / 131072.f,
                                 1 / 131072.f, 1 / 65536.f, 1 / 65536.f, 1 / 65536.f};
  for (size_t i = 0; i < infs.size(); ++i) {
    auto d = s.update(infs[i]);
    EXPECT_EQ(d.skip, skips[i]) << i;
    EXPECT_EQ(d.unscale, unscales[i]) << i;
    EXPECT_EQ(s.scale(), scales[i]) << i;
  }
  EXPECT_EQ(s.skipped_steps(), 1);
  optim::DynamicLossScaler dflt;  // the default interval: 2000 good steps, not 1999
  for (int i = 0; i < 1999; ++i) dflt.update(false);
  EXPECT_EQ(dflt.scale(), 65536.0f);
  dflt.update(false);
  EXPECT_EQ(dflt.scale(), 131072.0f);
}

TEST(OptimLossScaler, BelowMinimumIsAClearError) {
  optim::LossScalerOptions o;
  o.init_scale = 4.0f, o.min_scale = 1.0f;
  optim::DynamicLossScaler s(o);
  s.update(true), s.update(true);
  EXPECT_EQ(s.scale(), 1.0f);
  test::expect_invalid([&] { s.update(true); }, "diverging");
}

// End to end with f16 values: a planted Inf skips the step (values untouched), the next
// finite step is unscaled by the scale its grads were computed with.
TEST(OptimLossScaler, PlantedInfSkipsTheOptimizerStep) {
  Grads g(DType::F16);
  optim::SgdOptions so;
  so.lr = 1.0f;
  optim::Sgd opt(g.list, so);
  optim::DynamicLossScaler s;
  g.list[0]->grad.data<uint16_t>()[1] = 0x7c00;  // f16 +Inf
  Tensor before = test::converted(g.list[0]->value, DType::F32);
  auto d = s.update(!std::isfinite(optim::global_grad_norm(g.list)));
  ASSERT_TRUE(d.skip);
  opt.zero_grad();
  EXPECT_TRUE(test::same_bits(test::converted(g.list[0]->value, DType::F32), before));
  EXPECT_EQ(s.scale(), 32768.0f);
  // grads as backward of (loss * 32768) would give them: 0.5 * 32768.
  kernels::fill(g.list[0]->grad, 0.5f * 32768.0f);
  d = s.update(!std::isfinite(optim::global_grad_norm(g.list)));
  ASSERT_FALSE(d.skip);
  opt.step(d.unscale);
  test::expect_close(test::to_f64(g.list[0]->value), {-0.5, -0.5}, 0, 0, "value after unscaled step");
  EXPECT_EQ(opt.steps(), 1);
}

}  // namespace
}  // namespace dt
