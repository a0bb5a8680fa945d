// AdamW and SGD updates against hand-written double-precision references over 3 steps.
#include <cmath>
#include <cstring>

#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

using Vec = std::vector<double>;
constexpr int64_t kN = 37;

Tensor grad_of(int step, DType t) { return test::randn({kN}, t, 10 + step, "grad"); }

// The kernels compute in f32; three steps of a few flops per element stay within ~1e-6 relative.
TEST(AdamW, ThreeStepsMatchReference) {
  for (DType gt : {DType::F32, DType::BF16, DType::F16}) {
    kernels::AdamWParams p;
    p.lr = 1e-2f, p.beta1 = 0.9f, p.beta2 = 0.95f, p.eps = 1e-6f, p.weight_decay = 0.1f, p.grad_scale = 0.5f;
    Tensor param = test::randn({kN}, DType::F32, 1, "w"), m = Tensor::zeros({kN}, DType::F32);
    Tensor v = Tensor::zeros({kN}, DType::F32), copy = Tensor::zeros({kN}, DType::BF16);
    Vec pw = test::to_f64(param), mw(kN, 0.0), vw(kN, 0.0);
    for (int step = 1; step <= 3; ++step) {
      Tensor g = grad_of(step, gt);
      p.step = step;
      kernels::adamw_update(param, g, m, v, p, copy);
      Vec gv = test::to_f64(g);
      double b1 = p.beta1, b2 = p.beta2, bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
      for (int64_t i = 0; i < kN; ++i) {
        double gi = gv[i] * p.grad_scale;
        pw[i] *= 1 - double(p.lr) * p.weight_decay;
        mw[i] = b1 * mw[i] + (1 - b1) * gi;
        vw[i] = b2 * vw[i] + (1 - b2) * gi * gi;
        pw[i] -= p.lr * (mw[i] / bc1) / (std::sqrt(vw[i] / bc2) + p.eps);
      }
    }
    std::string what = std::string("grad ") + dtype_name(gt);
    test::expect_close(test::to_f64(param), pw, 1e-6, 1e-5, "param, " + what);
    test::expect_close(test::to_f64(m), mw, 1e-6, 1e-5, "m, " + what);
    test::expect_close(test::to_f64(v), vw, 1e-7, 1e-5, "v, " + what);
    // The bf16 copy is the f32 master rounded once.
    Tensor want_copy = Tensor::zeros({kN}, DType::BF16);
    kernels::cast(param, want_copy);
    EXPECT_EQ(std::memcmp(copy.raw(), want_copy.raw(), copy.nbytes()), 0) << what;
  }
}

struct SgdCase {
  float momentum, dampening, weight_decay;
  bool nesterov;
};

TEST(Sgd, ThreeStepsMatchReference) {
  const SgdCase cases[] = {{0, 0, 0.1f, false}, {0.9f, 0.1f, 0.01f, false}, {0.9f, 0, 0.01f, true}};
  for (const SgdCase& c : cases) {
    kernels::SgdParams p;
    p.lr = 0.05f, p.momentum = c.momentum, p.dampening = c.dampening, p.weight_decay = c.weight_decay;
    p.nesterov = c.nesterov, p.grad_scale = 2.0f;
    Tensor param = test::randn({kN}, DType::F32, 2, "w"), copy = Tensor::zeros({kN}, DType::F16);
    Tensor buf = c.momentum != 0 ? Tensor::zeros({kN}, DType::F32) : Tensor();  // undefined when unused
    Vec pw = test::to_f64(param), bw(kN, 0.0);
    for (int step = 1; step <= 3; ++step) {
      Tensor g = grad_of(step, DType::BF16);
      kernels::sgd_update(param, g, buf, p, copy);
      Vec gv = test::to_f64(g);
      for (int64_t i = 0; i < kN; ++i) {
        double gi = gv[i] * p.grad_scale + double(p.weight_decay) * pw[i];
        if (c.momentum != 0) {
          bw[i] = double(c.momentum) * bw[i] + (1 - double(c.dampening)) * gi;
          gi = c.nesterov ? gi + double(c.momentum) * bw[i] : bw[i];
        }
        pw[i] -= double(p.lr) * gi;
      }
    }
    std::string what = "momentum " + std::to_string(c.momentum) + (c.nesterov ? " nesterov" : "");
    test::expect_close(test::to_f64(param), pw, 1e-6, 1e-5, "param, " + what);
    if (c.momentum != 0) test::expect_close(test::to_f64(buf), bw, 1e-6, 1e-5, "buf, " + what);
    test::expect_close(test::to_f64(copy), pw, 1e-6, 1e-3, "f16 copy, " + what);  // f16: 2^-11 relative
  }
}

TEST(AdamW, BitwiseIdenticalForOneAndTwoThreads) {
  int keep = kernel_threads();
  Tensor out[2];
  kernels::AdamWParams p;
  p.weight_decay = 0.1f;
  for (int t = 0; t < 2; ++t) {
    set_kernel_threads(t + 1);
    Tensor w = test::randn({40000}, DType::F32, 3, "w"), g = test::randn({40000}, DType::F32, 3, "g");
    Tensor m = Tensor::zeros({40000}, DType::F32), v = Tensor::zeros({40000}, DType::F32), none;
    kernels::adamw_update(w, g, m, v, p, none);
    out[t] = w;
  }
  set_kernel_threads(keep);
  EXPECT_EQ(std::memcmp(out[0].raw(), out[1].raw(), out[0].nbytes()), 0);
}

using test::expect_invalid;

TEST(AdamW, RejectsBadArguments) {
  Tensor w = Tensor::zeros({4}, DType::F32), g = Tensor::zeros({4}, DType::F32), m = Tensor::zeros({4}, DType::F32);
  Tensor v = Tensor::zeros({4}, DType::F32), none;
  auto with = [&](auto edit, const std::string& fragment) {
    kernels::AdamWParams p;
    edit(p);
    expect_invalid([&] { kernels::adamw_update(w, g, m, v, p, none); }, fragment);
  };
  with([](auto& p) { p.lr = -1; }, "adamw_update: lr is -1");
  with([](auto& p) { p.beta1 = 1; }, "beta1 is 1.000000; accepted: [0, 1)");
  with([](auto& p) { p.beta2 = NAN; }, "beta2 is nan");
  with([](auto& p) { p.eps = 0; }, "eps is 0");
  with([](auto& p) { p.step = 0; }, "step is 0; accepted: >= 1");
  Tensor wb = Tensor::zeros({4}, DType::BF16), m5 = Tensor::zeros({5}, DType::F32);
  kernels::AdamWParams p;
  expect_invalid([&] { kernels::adamw_update(wb, g, m, v, p, none); }, "param has dtype bf16; required: f32");
  expect_invalid([&] { kernels::adamw_update(w, g, m5, v, p, none); }, "m has shape [5]");
  Tensor ci = Tensor::zeros({4}, DType::I32);
  expect_invalid([&] { kernels::adamw_update(w, g, m, v, p, ci); }, "param_copy has dtype i32");
}

TEST(Sgd, RejectsBadArguments) {
  Tensor w = Tensor::zeros({4}, DType::F32), g = Tensor::zeros({4}, DType::F32), none;
  kernels::SgdParams p;
  p.momentum = 0.9f;
  expect_invalid([&] { kernels::sgd_update(w, g, none, p, none); }, "momentum_buf is an empty tensor");
  Tensor buf = Tensor::zeros({4}, DType::F32);
  p.nesterov = true, p.dampening = 0.5f;
  expect_invalid([&] { kernels::sgd_update(w, g, buf, p, none); }, "nesterov requires momentum > 0 and dampening 0");
  p = kernels::SgdParams();
  p.momentum = -0.1f;
  expect_invalid([&] { kernels::sgd_update(w, g, buf, p, none); }, "sgd_update: momentum is -0.1");
  p = kernels::SgdParams();
  p.lr = INFINITY;
  expect_invalid([&] { kernels::sgd_update(w, g, none, p, none); }, "lr is inf");
}

}  // namespace
}  // namespace dt
