// dt_module_gpt_param_count: the count from the options alone equals what the built model
// reports (dt_module_param_count) for every shape choice, a model far too large to build is
// counted without allocating, and bad options fail as dt_module_create_gpt's do.
#include "abi_util.h"

namespace DT_TEST_NS {

struct Shape {
  const char* name;
  void (*apply)(Opts&);
};

// Each shape flips one choice the count depends on; "device" is left to the default.
const Shape kShapes[] = {
    {"gpt-tiny", [](Opts& o) { o.s("preset", "gpt-tiny"); }},
    {"gpt-small", [](Opts& o) { o.s("preset", "gpt-small"); }},
    {"llama-tiny", [](Opts& o) { o.s("preset", "llama-tiny"); }},
    {"grouped-query", [](Opts& o) { o.s("preset", "gpt-tiny").i("n_head", 4).i("n_kv_head", 2).i("d_ff", 96); }},
    {"untied, no bias", [](Opts& o) { o.s("preset", "gpt-tiny").b("tied_embeddings", false).b("bias", false); }},
    {"swiglu with layernorm and biases", [](Opts& o) { o.s("preset", "gpt-tiny").s("act", "swiglu").i("vocab_size", 97); }},
    {"rmsnorm with learned positions", [](Opts& o) { o.s("preset", "gpt-tiny").s("norm", "rmsnorm").i("context", 33); }},
    {"rope, bf16", [](Opts& o) { o.s("preset", "gpt-tiny").s("pos", "rope").s("precision", "bf16").i("n_layer", 3); }},
};

TEST(ParamCount, EqualsTheBuiltModelsCountForEveryShape) {
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(shape.name);
    Opts o;
    shape.apply(o);
    int64_t counted = -1, built = -2;
    OK(dt_module_gpt_param_count(o.o, &counted));
    dt_module* m = nullptr;
    OK(dt_module_create_gpt(o.o, &m));
    OK(dt_module_param_count(m, &built));
    dt_module_destroy(m);
    EXPECT_EQ(counted, built);
  }
}

TEST(ParamCount, ModelTooLargeToBuildIsCountedWithoutAllocating) {
  // 4096 blocks of width 131072 (the largest accepted): about 8.4e14 parameters, 3.4 PB in f32.
  Opts o;
  o.s("preset", "gpt-tiny").i("n_layer", 4096).i("d_model", 131072).i("n_head", 1024).s("device", "cuda:7");
  int64_t n = 0;
  OK(dt_module_gpt_param_count(o.o, &n));
  const double d = 131072.0, twelve_d2 = 12 * d * d;
  EXPECT_GT(static_cast<double>(n), 4096 * twelve_d2);
  EXPECT_LT(static_cast<double>(n), 4096 * twelve_d2 * 1.001);
}

TEST(ParamCount, BadOptionsFailAsCreateDoes) {
  int64_t n = 0;
  {
    Opts o;
    o.i("n_layer", 0);
    expect_error(dt_module_gpt_param_count(o.o, &n), DT_ERR_INVALID_ARGUMENT, {"n_layer", ">= 1"});
  }
  {
    Opts o;
    o.s("preset", "gpt-huge");
    expect_error(dt_module_gpt_param_count(o.o, &n), DT_ERR_INVALID_ARGUMENT, {"gpt-huge", "gpt-tiny"});
  }
  {
    Opts o;
    o.i("d_model", 10).i("n_head", 3);
    expect_error(dt_module_gpt_param_count(o.o, &n), DT_ERR_INVALID_ARGUMENT, {"does not divide"});
  }
  {
    Opts o;
    o.s("device", "gpu0");
    expect_error(dt_module_gpt_param_count(o.o, &n), DT_ERR_INVALID_ARGUMENT, {"device"});
  }
  {
    Opts o;
    o.i("n_layers", 2);  // a misspelt key
    expect_error(dt_module_gpt_param_count(o.o, &n), DT_ERR_INVALID_ARGUMENT, {"n_layers"});
  }
  Opts o;
  expect_error(dt_module_gpt_param_count(o.o, nullptr), DT_ERR_INVALID_ARGUMENT, {"out"});
  OK(dt_module_gpt_param_count(nullptr, &n));  // no options: the defaults (gpt-small's shape)
  EXPECT_GT(n, 0);
}

}  // namespace
