// SGD and AdamW over several parameters for 5 steps against double-precision references
// written here; mixed precision (bf16 values, f32 masters) against an f32 run; state names
// and the memory they are counted under.
#include <cmath>
#include <memory>

#include "core/allocator.h"
#include "optim/optimizer.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

using Vec = std::vector<double>;
const std::vector<Shape> kShapes = {{7}, {3, 5}, {2, 2, 3}};

struct Model {
  std::vector<std::unique_ptr<nn::Parameter>> owned;
  nn::ParamList list;
  explicit Model(DType dtype) {
    for (size_t i = 0; i < kShapes.size(); ++i) {
      auto p = std::make_unique<nn::Parameter>();
      p->name = "layer" + std::to_string(i) + ".w";
      // Values start on the bf16 grid so that f32 and bf16 runs begin at the same point.
      p->value = test::converted(test::converted(test::randn(kShapes[i], DType::F32, 3, p->name), DType::BF16), dtype);
      p->grad = Tensor::zeros(kShapes[i], dtype);
      list.push_back(p.get());
      owned.push_back(std::move(p));
    }
  }
  // Step-dependent gradients, on the bf16 grid too (the same inputs for every dtype).
  void set_grads(int step) {
    for (nn::Parameter* p : list)
      kernels::cast(test::converted(test::randn(p->value.shape(), DType::F32, 100 + step, p->name), DType::BF16),
                    p->grad);
  }
};

TEST(OptimAdamW, FiveStepsMatchDoubleReference) {
  optim::AdamWOptions o;
  o.lr = 1e-2f, o.beta1 = 0.9f, o.beta2 = 0.95f, o.eps = 1e-6f, o.weight_decay = 0.1f;
  Model model(DType::F32);
  std::vector<Vec> w, m, v;
  for (auto* p : model.list) {
    w.push_back(test::to_f64(p->value));
    m.emplace_back(p->value.numel(), 0.0), v.emplace_back(p->value.numel(), 0.0);
  }
  optim::AdamW opt(model.list, o);
  for (int step = 1; step <= 5; ++step) {
    model.set_grads(step);
    opt.step(0.5f);
    double bc1 = 1 - std::pow(double(o.beta1), step), bc2 = 1 - std::pow(double(o.beta2), step);
    for (size_t k = 0; k < w.size(); ++k) {
      Vec g = test::to_f64(model.list[k]->grad);
      for (size_t i = 0; i < g.size(); ++i) {
        double gi = 0.5 * g[i];
        w[k][i] *= 1 - double(o.lr) * double(o.weight_decay);
        m[k][i] = o.beta1 * m[k][i] + (1 - double(o.beta1)) * gi;
        v[k][i] = o.beta2 * v[k][i] + (1 - double(o.beta2)) * gi * gi;
        w[k][i] -= o.lr * (m[k][i] / bc1) / (std::sqrt(v[k][i] / bc2) + o.eps);
      }
    }
  }
  EXPECT_EQ(opt.steps(), 5);
  // f32 math over 5 steps of a few flops per element: ~1e-6 relative.
  for (size_t k = 0; k < w.size(); ++k) test::expect_close(test::to_f64(model.list[k]->value), w[k], 1e-6, 1e-5, "w" + std::to_string(k));
}

void sgd_against_reference(float momentum, float dampening, bool nesterov) {
  optim::SgdOptions o;
  o.lr = 0.05f, o.momentum = momentum, o.dampening = dampening, o.weight_decay = 0.01f, o.nesterov = nesterov;
  Model model(DType::F32);
  std::vector<Vec> w, buf;
  for (auto* p : model.list) w.push_back(test::to_f64(p->value)), buf.emplace_back(p->value.numel(), 0.0);
  optim::Sgd opt(model.list, o);
  for (int step = 1; step <= 5; ++step) {
    model.set_grads(step);
    opt.step();
    for (size_t k = 0; k < w.size(); ++k) {
      Vec g = test::to_f64(model.list[k]->grad);
      for (size_t i = 0; i < g.size(); ++i) {  // torch.optim.SGD, written out
        double d = g[i] + double(o.weight_decay) * w[k][i];
        if (momentum != 0) {
          buf[k][i] = step == 1 ? d : momentum * buf[k][i] + (1 - double(dampening)) * d;
          d = nesterov ? d + momentum * buf[k][i] : buf[k][i];
        }
        w[k][i] -= o.lr * d;
      }
    }
  }
  for (size_t k = 0; k < w.size(); ++k)
    test::expect_close(test::to_f64(model.list[k]->value), w[k], 1e-6, 1e-5,
                       "sgd momentum " + std::to_string(momentum) + " w" + std::to_string(k));
}

TEST(OptimSgd, FiveStepsMatchDoubleReference) {
  sgd_against_reference(0.0f, 0.0f, false);
  sgd_against_reference(0.9f, 0.0f, false);
  sgd_against_reference(0.9f, 0.25f, false);  // step 1 ignores dampening, as PyTorch
  sgd_against_reference(0.9f, 0.0f, true);
}

// bf16 values with f32 masters: the master follows the f32 run bitwise (same f32 math on
// the same inputs); the bf16 value is that master rounded once, so it stays within half a
// bf16 ulp (relative 2^-8: 8 significand bits) of the f32 run.
TEST(OptimMixedPrecision, Bf16WithMastersTracksF32Run) {
  optim::AdamWOptions o;
  o.lr = 1e-3f, o.weight_decay = 0.1f;
  Model f32(DType::F32), b16(DType::BF16);
  optim::AdamW opt32(f32.list, o), opt16(b16.list, o);
  for (int step = 1; step <= 10; ++step) {
    f32.set_grads(step), b16.set_grads(step);
    opt32.step(), opt16.step();
  }
  optim::NamedTensors st = opt16.state();
  for (size_t k = 0; k < kShapes.size(); ++k) {
    const nn::Parameter& p = *b16.list[k];
    Tensor master;
    for (auto& [name, t] : st)
      if (name == p.name + ".master") master = t;
    ASSERT_TRUE(master.defined()) << p.name;
    EXPECT_TRUE(test::same_bits(master, f32.list[k]->value)) << p.name;
    EXPECT_TRUE(test::same_bits(p.value, test::converted(master, DType::BF16))) << p.name;
    test::expect_close(test::to_f64(p.value), test::to_f64(f32.list[k]->value), 0.0, 1.0 / 256, p.name);
  }
}

TEST(OptimState, NamesTagsAndZeroGrad) {
  Ledger& ledger = ledger_for(Device::cpu());
  int64_t before = ledger.current(DT_MEM_OPTIMIZER);
  Model model(DType::BF16);
  int64_t numel = 0;
  for (auto* p : model.list) numel += p->value.numel();
  {
    optim::AdamW opt(model.list, {});
    // K = 12 bytes/param (master, exp_avg, exp_avg_sq in f32), plus the step counter.
    EXPECT_EQ(ledger.current(DT_MEM_OPTIMIZER) - before, 12 * numel + 8);
    std::vector<std::string> names;
    for (auto& kv : opt.state()) names.push_back(kv.first);
    EXPECT_EQ(names.size(), 3 * kShapes.size() + 1);
    EXPECT_NE(std::find(names.begin(), names.end(), "layer1.w.exp_avg_sq"), names.end());
    EXPECT_NE(std::find(names.begin(), names.end(), "optimizer.step"), names.end());
    model.set_grads(1);
    opt.zero_grad();
    for (auto* p : model.list) for (double g : test::to_f64(p->grad)) EXPECT_EQ(g, 0.0);
  }
  EXPECT_EQ(ledger.current(DT_MEM_OPTIMIZER), before);
  Model plain(DType::F32);
  optim::Sgd sgd(plain.list, {});  // no momentum, f32: nothing but the step counter
  EXPECT_EQ(sgd.state().size(), 1u);
}

TEST(OptimState, RejectsBadParameters) {
  Model model(DType::F32);
  model.list[2]->name = model.list[0]->name;
  test::expect_invalid([&] { optim::AdamW opt(model.list, {}); }, "appears twice");
  Model m2(DType::F32);
  m2.list[1]->grad = Tensor::zeros({4}, DType::F32);
  test::expect_invalid([&] { optim::Sgd opt(m2.list, {}); }, "layer1.w");
}

}  // namespace
}  // namespace dt
