// dt_module_param views stay true on every layout of an engine made over the module: after
// steps they read what one rank trained, and a write through them reaches every replica,
// part and the optimizer's master, so the next step continues from it as one rank's would.
// (Before the layout layer, tp and pp engines' views kept the initial weights and writes
// were silently dropped.)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "abi_util.h"

namespace DT_TEST_NS {

constexpr int64_t kVocab = 64, kB = 4, kT = 16;

dt_module* gpt(const char* precision = "f32") {
  Opts c;
  c.s("preset", "gpt-tiny").i("vocab_size", kVocab).i("context", 32).i("seed", 7).s("precision", precision);
  dt_module* m = nullptr;
  EXPECT_EQ(dt_module_create_gpt(c.o, &m), DT_OK) << dt_last_error_message();
  return m;
}

struct Batch {
  dt_tensor *in = nullptr, *tg = nullptr;
  Batch() {
    std::vector<int32_t> x(kB * kT), y(kB * kT);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<int32_t>((i * 7 + 3) % kVocab);
      y[i] = static_cast<int32_t>((i * 7 + 10) % kVocab);
    }
    int64_t shape[2] = {kB, kT};
    EXPECT_EQ(dt_tensor_create(DT_I32, shape, 2, "cpu", nullptr, &in), DT_OK);
    EXPECT_EQ(dt_tensor_create(DT_I32, shape, 2, "cpu", nullptr, &tg), DT_OK);
    EXPECT_EQ(dt_tensor_copy_from_host(in, x.data(), x.size() * 4), DT_OK);
    EXPECT_EQ(dt_tensor_copy_from_host(tg, y.data(), y.size() * 4), DT_OK);
  }
  ~Batch() {
    dt_tensor_destroy(in);
    dt_tensor_destroy(tg);
  }
};

// A module, its AdamW and an engine over a local mesh of the given axes (none: one rank).
struct Engine {
  dt_module* m = nullptr;
  dt_optimizer* opt = nullptr;
  dt_mesh* mesh = nullptr;
  dt_engine* e = nullptr;
  Engine(int dp, int tp, int pp, int zero, const char* precision = "f32") {
    m = gpt(precision);
    Opts oo;
    oo.d("lr", 3e-3);
    EXPECT_EQ(dt_optimizer_create(m, "adamw", oo.o, &opt), DT_OK) << dt_last_error_message();
    if (dp * tp * pp > 1) {
      Opts mo;
      mo.i("dp", dp).i("tp", tp).i("pp", pp);
      EXPECT_EQ(dt_mesh_create("local", dp * tp * pp, mo.o, &mesh), DT_OK) << dt_last_error_message();
    }
    Opts eo;
    eo.i("zero", zero).i("micro_batches", pp > 1 ? 2 : 1);
    EXPECT_EQ(dt_engine_create(mesh, m, opt, eo.o, &e), DT_OK) << dt_last_error_message();
  }
  ~Engine() {
    dt_engine_destroy(e);
    dt_optimizer_destroy(opt);
    dt_mesh_destroy(mesh);
    dt_module_destroy(m);
  }
  void step(const Batch& b) { EXPECT_EQ(dt_engine_train_step(e, b.in, b.tg, nullptr), DT_OK) << dt_last_error_message(); }
};

std::vector<std::string> names(dt_module* m) {
  int64_t n = 0;
  EXPECT_EQ(dt_module_param_count_tensors(m, &n), DT_OK);
  std::vector<std::string> out;
  for (int64_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    EXPECT_EQ(dt_module_param_name(m, i, &name), DT_OK);
    out.push_back(name);
  }
  return out;
}

// A parameter's values read through a fresh view, as f32 (bf16 widened).
std::vector<float> read(dt_module* m, const std::string& name) {
  dt_tensor* v = nullptr;
  EXPECT_EQ(dt_module_param(m, name.c_str(), &v), DT_OK) << dt_last_error_message();
  int64_t n = 0;
  dt_dtype dtype = DT_F32;
  EXPECT_EQ(dt_tensor_numel(v, &n), DT_OK);
  EXPECT_EQ(dt_tensor_dtype(v, &dtype), DT_OK);
  std::vector<float> out(static_cast<size_t>(n));
  if (dtype == DT_F32) {
    EXPECT_EQ(dt_tensor_copy_to_host(v, out.data(), out.size() * 4), DT_OK) << dt_last_error_message();
  } else {
    std::vector<uint16_t> raw(out.size());
    EXPECT_EQ(dt_tensor_copy_to_host(v, raw.data(), raw.size() * 2), DT_OK) << dt_last_error_message();
    for (size_t i = 0; i < raw.size(); ++i) {
      const uint32_t bits = static_cast<uint32_t>(raw[i]) << 16;
      std::memcpy(&out[i], &bits, 4);
    }
  }
  dt_tensor_destroy(v);
  return out;
}

dt_status write(dt_module* m, const std::string& name, const std::vector<float>& values) {
  dt_tensor* v = nullptr;
  EXPECT_EQ(dt_module_param(m, name.c_str(), &v), DT_OK) << dt_last_error_message();
  const dt_status st = dt_tensor_copy_from_host(v, values.data(), values.size() * 4);
  dt_tensor_destroy(v);
  return st;
}

// ||a - b|| / ||b|| over every parameter's elements together (the equivalence tests' measure).
double max_rel_diff(dt_module* a, dt_module* b) {
  double d2 = 0, b2 = 0;
  for (const std::string& n : names(b)) {
    const std::vector<float> x = read(a, n), y = read(b, n);
    EXPECT_EQ(x.size(), y.size()) << n;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      d2 += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
      b2 += double(y[i]) * y[i];
    }
  }
  return std::sqrt(d2 / b2);
}

struct Axes {
  int dp, tp, pp;
};

// The tolerance of the equivalence tests (f32, relative): the layouts sum in other orders.
constexpr double kTol = 2e-5;

TEST(ModuleViews, ReadsAndWritesAreTrueOnEveryLayout) {
  const Batch b;
  const std::vector<float> initial = read(Engine(1, 1, 1, 0).m, "blocks.0.mlp.fc.weight");
  for (const Axes& l : {Axes{2, 1, 1}, Axes{1, 2, 1}, Axes{1, 1, 2}, Axes{2, 2, 1}, Axes{1, 2, 2}}) {
    const std::string what = "dp " + std::to_string(l.dp) + " x tp " + std::to_string(l.tp) + " x pp " +
                             std::to_string(l.pp);
    Engine one(1, 1, 1, 0), many(l.dp, l.tp, l.pp, 0);
    for (int s = 0; s < 2; ++s) {
      one.step(b);
      many.step(b);
    }
    // Reads: the trained weights, not the initial ones.
    const std::vector<float> trained = read(many.m, "blocks.0.mlp.fc.weight");
    double moved = 0;
    for (size_t i = 0; i < trained.size(); ++i) moved = std::max(moved, double(std::fabs(trained[i] - initial[i])));
    EXPECT_GT(moved, 1e-3) << what << ": the view still shows the initial weights";
    EXPECT_LE(max_rel_diff(many.m, one.m), kTol) << what << " after 2 steps";
    // Writes: a block's weight halved and the token table (tied to the head: a pipeline's
    // last stage holds a copy) shifted, in both; the next step continues from them.
    for (const char* name : {"blocks.0.mlp.fc.weight", "wte.weight"}) {
      std::vector<float> v = read(one.m, name);
      for (float& x : v) x = std::string(name) == "wte.weight" ? x + 0.05f : x * 0.5f;
      ASSERT_EQ(write(one.m, name, v), DT_OK) << dt_last_error_message();
      ASSERT_EQ(write(many.m, name, v), DT_OK) << what << ": " << dt_last_error_message();
      EXPECT_EQ(read(many.m, name), v) << what << ": a read after a write sees it";
    }
    one.step(b);
    many.step(b);
    EXPECT_LE(max_rel_diff(many.m, one.m), kTol) << what << " after the writes and a step";
    double loss_one = 0, loss_many = 0;
    ASSERT_EQ(dt_engine_eval(one.e, b.in, b.tg, &loss_one), DT_OK);
    ASSERT_EQ(dt_engine_eval(many.e, b.in, b.tg, &loss_many), DT_OK) << dt_last_error_message();
    EXPECT_NEAR(loss_many, loss_one, 1e-4 * std::fabs(loss_one)) << what;
  }
}

// bf16 keeps f32 masters: a write must reach the master, or the next step would put the old
// value back. Zeroed weights stay near zero after one small step (one rank and tp 2).
TEST(ModuleViews, WritesReachTheMastersOfMixedPrecision) {
  const Batch b;
  for (int tp : {1, 2}) {
    Engine r(1, tp, 1, 0, "bf16");
    r.step(b);
    const std::string name = "blocks.0.attn.proj.weight";
    std::vector<float> zeros(read(r.m, name).size(), 0.0f);
    std::vector<uint16_t> bf(zeros.size(), 0);
    dt_tensor* v = nullptr;
    ASSERT_EQ(dt_module_param(r.m, name.c_str(), &v), DT_OK);
    ASSERT_EQ(dt_tensor_copy_from_host(v, bf.data(), bf.size() * 2), DT_OK) << dt_last_error_message();
    dt_tensor_destroy(v);
    r.step(b);
    double most = 0;
    for (float x : read(r.m, name)) most = std::max(most, double(std::fabs(x)));
    EXPECT_LT(most, 0.05) << "tp " << tp << ": the step restored the weights from a stale master";
  }
}

TEST(ModuleViews, ZeroReadsTrueAndRefusesWritesByName) {
  const Batch b;
  Engine one(1, 1, 1, 0), zero(2, 1, 1, 1);
  one.step(b);
  zero.step(b);
  EXPECT_LE(max_rel_diff(zero.m, one.m), kTol);
  std::vector<float> v = read(zero.m, "wte.weight");
  expect_error(write(zero.m, "wte.weight", v), DT_ERR_UNSUPPORTED, {"wte.weight", "ZeRO", "dt_engine_load"});
}

}  // namespace
