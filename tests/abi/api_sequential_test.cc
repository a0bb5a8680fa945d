// A host's own network and training loop through the C ABI: a sequential module learns a
// regression with MSE and a classification with cross-entropy, forward/backward agree with
// the MLP preset, and bad layer lists and misuse are named errors.
#include <cmath>
#include <vector>

#include "abi_util.h"

namespace DT_TEST_NS {

dt_tensor* f32(const std::vector<float>& v, int64_t rows, int64_t cols) {
  int64_t shape[2] = {rows, cols};
  dt_tensor* t = nullptr;
  EXPECT_EQ(dt_tensor_create(DT_F32, shape, 2, "cpu", nullptr, &t), DT_OK);
  EXPECT_EQ(dt_tensor_copy_from_host(t, v.data(), v.size() * 4), DT_OK);
  return t;
}

dt_module* sequential(const char* layers, int64_t seed = 1, double init_std = 0.3) {
  Opts c;
  c.s("layers", layers).i("seed", seed).d("init_std", init_std);
  dt_module* m = nullptr;
  EXPECT_EQ(dt_module_create_sequential(c.o, &m), DT_OK) << dt_last_error_message();
  return m;
}

// One host-written step: zero, forward, loss, backward, update. Returns the loss.
double step(dt_module* m, dt_optimizer* opt, const char* kind, dt_tensor* x, dt_tensor* target) {
  double loss = 0;
  dt_tensor *y = nullptr, *dy = nullptr;
  EXPECT_EQ(dt_module_zero_grad(m), DT_OK);
  EXPECT_EQ(dt_module_forward(m, x, &y), DT_OK) << dt_last_error_message();
  EXPECT_EQ(dt_loss(kind, y, target, &loss, &dy), DT_OK) << dt_last_error_message();
  EXPECT_EQ(dt_module_backward(m, dy, nullptr), DT_OK) << dt_last_error_message();
  EXPECT_EQ(dt_optimizer_step(opt), DT_OK);
  dt_tensor_destroy(y);
  dt_tensor_destroy(dy);
  return loss;
}

TEST(Sequential, LearnsARegressionInAHostLoop) {
  // y = sin(x0) + x1 * x2 on 32 fixed points.
  const int64_t N = 32;
  std::vector<float> xs(N * 3), ys(N);
  for (int64_t i = 0; i < N; ++i) {
    for (int k = 0; k < 3; ++k) xs[i * 3 + k] = std::sin(0.37f * static_cast<float>(i * 3 + k + 1));
    ys[i] = std::sin(xs[i * 3]) + xs[i * 3 + 1] * xs[i * 3 + 2];
  }
  dt_tensor *x = f32(xs, N, 3), *y = f32(ys, N, 1);
  dt_module* m = sequential("linear:3:32,gelu,layernorm:32,linear:32:32,silu,linear:32:1");
  int64_t params = 0;
  OK(dt_module_param_count(m, &params));
  EXPECT_EQ(params, 3 * 32 + 32 + 64 + 32 * 32 + 32 + 32 + 1);
  const char* name = nullptr;
  OK(dt_module_param_name(m, 0, &name));
  EXPECT_STREQ(name, "0.weight");
  Opts oo;
  oo.d("lr", 1e-2).d("weight_decay", 0.0);
  dt_optimizer* opt = nullptr;
  OK(dt_optimizer_create(m, "adamw", oo.o, &opt));
  double first = step(m, opt, "mse", x, y), last = first;
  for (int i = 0; i < 300; ++i) last = step(m, opt, "mse", x, y);
  std::printf("mse %.4f -> %.5f\n", first, last);
  EXPECT_LT(last, first * 0.02);
  OK(dt_optimizer_set_lr(opt, 0.0));  // lr 0: a step changes nothing
  double before = step(m, opt, "mse", x, y), after = step(m, opt, "mse", x, y);
  EXPECT_EQ(before, after);
  dt_optimizer_destroy(opt);
  dt_module_destroy(m);
  dt_tensor_destroy(x);
  dt_tensor_destroy(y);
}

TEST(Sequential, LearnsAClassificationWithCrossEntropy) {
  // 4 classes of the sign pattern of two inputs; one row ignored (-1).
  const int64_t N = 16;
  std::vector<float> xs(N * 2);
  std::vector<int32_t> cls(N);
  for (int64_t i = 0; i < N; ++i) {
    xs[i * 2] = std::cos(1.3f * static_cast<float>(i));
    xs[i * 2 + 1] = std::sin(2.1f * static_cast<float>(i) + 0.5f);
    cls[i] = (xs[i * 2] > 0) * 2 + (xs[i * 2 + 1] > 0);
  }
  cls[5] = -1;
  dt_tensor* x = f32(xs, N, 2);
  int64_t shape[1] = {N};
  dt_tensor* t = nullptr;
  OK(dt_tensor_create(DT_I32, shape, 1, "cpu", nullptr, &t));
  OK(dt_tensor_copy_from_host(t, cls.data(), cls.size() * 4));
  dt_module* m = sequential("linear:2:16,gelu,linear:16:4", 4, 0.5);
  Opts oo;
  oo.d("lr", 0.1).d("momentum", 0.9);
  dt_optimizer* opt = nullptr;
  OK(dt_optimizer_create(m, "sgd", oo.o, &opt));
  double first = step(m, opt, "cross_entropy", x, t), last = first;
  for (int i = 0; i < 200; ++i) last = step(m, opt, "cross_entropy", x, t);
  std::printf("cross-entropy %.4f -> %.5f\n", first, last);
  EXPECT_LT(last, 0.1);
  EXPECT_GT(first, 1.0);

  cls[0] = 4;  // outside [0, V)
  OK(dt_tensor_copy_from_host(t, cls.data(), cls.size() * 4));
  dt_tensor* y = nullptr;
  OK(dt_module_forward(m, x, &y));
  double loss = 0;
  expect_error(dt_loss("cross_entropy", y, t, &loss, nullptr), DT_ERR_INVALID_ARGUMENT, {"target[0] = 4", "0 to 3"});
  expect_error(dt_loss("hinge", y, t, &loss, nullptr), DT_ERR_INVALID_ARGUMENT, {"\"mse\"", "\"cross_entropy\""});
  expect_error(dt_loss("mse", y, x, &loss, nullptr), DT_ERR_INVALID_ARGUMENT, {"one shape"});
  dt_tensor_destroy(y);
  dt_optimizer_destroy(opt);
  dt_module_destroy(m);
  dt_tensor_destroy(x);
  dt_tensor_destroy(t);
}

TEST(Sequential, TheMLPPresetIsDrivenTheSameWay) {
  Opts c;
  c.s("sizes", "3,8,2").i("seed", 2);
  dt_module* mlp = nullptr;
  OK(dt_module_create_mlp(c.o, &mlp));
  dt_tensor* x = f32({0.1f, -0.2f, 0.3f, 0.5f, 0.0f, -1.0f}, 2, 3);
  dt_tensor *y = nullptr, *dx = nullptr;
  expect_error(dt_module_backward(mlp, x, nullptr), DT_ERR_INVALID_ARGUMENT, {"call dt_module_forward first"});
  OK(dt_module_forward(mlp, x, &y));
  OK(dt_module_backward(mlp, y, &dx));  // dy = y: the gradient of 0.5 |y|^2
  int64_t shape[2];
  OK(dt_tensor_shape(dx, shape, 2));
  EXPECT_EQ(shape[0], 2);
  EXPECT_EQ(shape[1], 3);
  dt_tensor_destroy(y);
  dt_tensor_destroy(dx);
  dt_tensor_destroy(x);
  dt_module_destroy(mlp);
}

TEST(Sequential, BadLayerListsAndMisuseAreNamedErrors) {
  dt_module* m = nullptr;
  expect_error(dt_module_create_sequential(nullptr, &m), DT_ERR_INVALID_ARGUMENT, {"\"layers\" is required"});
  for (const char* bad : {"linear:3", "linear:3:0", "linear:3:x", "conv:3:3", "relu", "linear:3:4:bias", ""}) {
    Opts c;
    c.s("layers", bad);
    expect_error(dt_module_create_sequential(c.o, &m), DT_ERR_INVALID_ARGUMENT, {"layers", "linear:IN:OUT"});
  }
  {
    Opts c;
    c.s("layers", "linear:3:4,gelu,linear:5:1");
    expect_error(dt_module_create_sequential(c.o, &m), DT_ERR_INVALID_ARGUMENT, {"takes width 5", "give 4"});
  }
  {  // sizes past 2^31 (IN x OUT must not overflow), and a model no machine here can hold:
    // refused from the figures, before anything is allocated
    Opts c;
    c.s("layers", "linear:3:2147483649");
    expect_error(dt_module_create_sequential(c.o, &m), DT_ERR_INVALID_ARGUMENT, {"from 1 to 2147483648"});
    c.s("layers", "linear:1000000:1000000,gelu,layernorm:1000000");
    expect_error(dt_module_create_sequential(c.o, &m), DT_ERR_OUT_OF_MEMORY,
                 {"1000003000000 parameters", "gradients", "bytes of memory"});
  }
  EXPECT_EQ(m, nullptr);
  m = sequential("linear:3:4,rmsnorm:4,linear:4:2:nobias");
  dt_tensor* wrong = f32(std::vector<float>(8), 2, 4);
  dt_tensor* y = nullptr;
  expect_error(dt_module_forward(m, wrong, &y), DT_ERR_INVALID_ARGUMENT, {"x: expected f32 [N, 3]"});
  EXPECT_EQ(y, nullptr);
  dt_tensor_destroy(wrong);
  dt_module_destroy(m);

  Opts g;
  g.s("preset", "gpt-tiny");
  dt_module* gpt = nullptr;
  OK(dt_module_create_gpt(g.o, &gpt));
  dt_tensor* x = f32(std::vector<float>(4), 1, 4);
  expect_error(dt_module_forward(gpt, x, &y), DT_ERR_INVALID_ARGUMENT, {"GPT", "dt_engine_"});
  dt_tensor_destroy(x);
  dt_module_destroy(gpt);
}

}  // namespace
