// Modules, optimizers and the engine through the C ABI, as a host would drive them: a tiny
// GPT from options learns a fixed batch, generates deterministically, round-trips a
// checkpoint, survives any destroy order, and every bad input is a named error.
#include "abi_util.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace DT_TEST_NS {

constexpr int64_t kB = 4, kT = 16, kVocab = 32;

dt_module* tiny_gpt() {
  Opts c;
  c.s("preset", "gpt-tiny").i("vocab_size", kVocab).i("context", 32).i("seed", 7);
  dt_module* m = nullptr;
  EXPECT_EQ(dt_module_create_gpt(c.o, &m), DT_OK) << dt_last_error_message();
  return m;
}

dt_tensor* ids(const std::vector<int32_t>& v, dt_dtype dtype = DT_I32) {
  int64_t shape[2] = {kB, kT};
  dt_tensor* t = nullptr;
  EXPECT_EQ(dt_tensor_create(dtype, shape, 2, "cpu", nullptr, &t), DT_OK);
  if (dtype == DT_I32) EXPECT_EQ(dt_tensor_copy_from_host(t, v.data(), v.size() * 4), DT_OK);
  return t;
}

// A fixed batch: the next token of a short repeating pattern, easy to memorize.
struct Batch {
  dt_tensor *in = nullptr, *tg = nullptr;
  Batch() {
    std::vector<int32_t> a(kB * kT), b(kB * kT);
    for (int64_t r = 0; r < kB; ++r)
      for (int64_t t = 0; t < kT; ++t) {
        a[r * kT + t] = static_cast<int32_t>((r + t) % 5 + 1);
        b[r * kT + t] = static_cast<int32_t>((r + t + 1) % 5 + 1);
      }
    in = ids(a);
    tg = ids(b);
  }
  ~Batch() {
    dt_tensor_destroy(in);
    dt_tensor_destroy(tg);
  }
};

struct Rig {
  dt_module* m = nullptr;
  dt_optimizer* opt = nullptr;
  dt_engine* e = nullptr;
  Rig() {
    m = tiny_gpt();
    Opts oo;
    oo.d("lr", 3e-3);
    EXPECT_EQ(dt_optimizer_create(m, "adamw", oo.o, &opt), DT_OK) << dt_last_error_message();
    EXPECT_EQ(dt_engine_create(nullptr, m, opt, nullptr, &e), DT_OK) << dt_last_error_message();
  }
  ~Rig() {
    dt_engine_destroy(e);
    dt_optimizer_destroy(opt);
    dt_module_destroy(m);
  }
};

std::vector<int32_t> greedy(dt_engine* e, int64_t n = 8) {
  const int32_t prompt[5] = {1, 2, 3, 4, 5};
  const int64_t lens[2] = {3, 2};
  Opts g;
  g.i("max_new_tokens", n);
  std::vector<int32_t> out(2 * n, -7);
  int64_t out_len[2] = {0, 0};
  EXPECT_EQ(dt_engine_generate(e, prompt, lens, 2, g.o, out.data(), n, out_len), DT_OK) << dt_last_error_message();
  EXPECT_EQ(out_len[0], n);
  EXPECT_EQ(out_len[1], n);
  return out;
}

TEST(Model, TrainEvalGenerateSaveLoad) {
  Rig r;
  Batch b;
  double first = 0, loss = 0;
  OK(dt_engine_train_step(r.e, b.in, b.tg, &first));
  for (int i = 0; i < 30; ++i) OK(dt_engine_train_step(r.e, b.in, b.tg, &loss));
  EXPECT_LT(loss, first * 0.5) << "first " << first << " last " << loss;
  std::printf("loss %.4f -> %.4f\n", first, loss);
  size_t needed = 0;
  OK(dt_engine_last_stats_json(r.e, nullptr, 0, &needed));
  std::string json(needed, '\0');
  OK(dt_engine_last_stats_json(r.e, json.data(), json.size(), &needed));
  EXPECT_NE(json.find("\"step\":31"), std::string::npos) << json;
  double ev = 0;
  OK(dt_engine_eval(r.e, b.in, b.tg, &ev));
  EXPECT_LT(ev, first);

  std::vector<int32_t> g1 = greedy(r.e), g2 = greedy(r.e);
  EXPECT_EQ(g1, g2);
  for (int32_t t : g1) EXPECT_TRUE(t >= 0 && t < kVocab);
  std::printf("greedy:");
  for (int32_t t : g1) std::printf(" %d", t);
  std::printf("\n");

  const std::string stem = ::testing::TempDir() + "dtrain_api_model_" + std::to_string(::getpid()) + "/run";
  OK(dt_engine_save(r.e, stem.c_str()));
  // An untrained engine generates what the trained one did once it loads the checkpoint.
  Rig fresh;
  OK(dt_engine_load(fresh.e, stem.c_str()));
  EXPECT_EQ(greedy(fresh.e), g1);
  double ev2 = 0;
  OK(dt_engine_eval(fresh.e, b.in, b.tg, &ev2));
  EXPECT_EQ(ev, ev2);

  // Corrupt the data file the index names: the load fails with DT_ERR_IO, nothing changes.
  const std::string dir = stem.substr(0, stem.rfind('/') + 1);
  int corrupted = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".safetensors") continue;
    std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f.write("\xff\xff\xff\xff\xff\xff\xff\x7f", 8);  // an absurd header length
    ++corrupted;
  }
  ASSERT_EQ(corrupted, 1);
  OK(dt_engine_train_step(fresh.e, b.in, b.tg, nullptr));
  std::vector<int32_t> before = greedy(fresh.e);
  expect_error(dt_engine_load(fresh.e, stem.c_str()), DT_ERR_IO, {});
  EXPECT_EQ(greedy(fresh.e), before);
  expect_error(dt_engine_load(fresh.e, (dir + "missing").c_str()), DT_ERR_IO, {});
  std::filesystem::remove_all(dir);
}

TEST(Model, ParamsAreNamedViews) {
  dt_module* m = tiny_gpt();
  int64_t n = 0, count = 0;
  OK(dt_module_param_count_tensors(m, &n));
  OK(dt_module_param_count(m, &count));
  ASSERT_GT(n, 2);
  int64_t sum = 0;
  const char* name = nullptr;
  for (int64_t i = 0; i < n; ++i) {
    OK(dt_module_param_name(m, i, &name));
    dt_tensor* p = nullptr;
    OK(dt_module_param(m, name, &p));
    int64_t k = 0;
    OK(dt_tensor_numel(p, &k));
    sum += k;
    dt_tensor_destroy(p);
  }
  EXPECT_EQ(sum, count);
  dt_tensor* w = nullptr;
  OK(dt_module_param(m, "wte.weight", &w));
  dt_module_destroy(m);  // the view keeps the module alive
  int64_t k = 0;
  OK(dt_tensor_numel(w, &k));
  std::vector<float> v(k, 0.5f), back(k);
  OK(dt_tensor_copy_from_host(w, v.data(), k * 4));
  OK(dt_tensor_copy_to_host(w, back.data(), k * 4));
  EXPECT_EQ(back, v);
  dt_tensor_destroy(w);

  Opts c;
  c.s("sizes", "4,32,1").s("act", "silu");
  dt_module* mlp = nullptr;
  OK(dt_module_create_mlp(c.o, &mlp));
  OK(dt_module_param_count(mlp, &count));
  EXPECT_EQ(count, 4 * 32 + 32 + 32 * 1 + 1);
  dt_module_destroy(mlp);
}

TEST(Model, AnyDestroyOrder) {
  Batch b;
  for (int order = 0; order < 3; ++order) {
    Rig* r = new Rig();
    if (order == 0) { dt_module_destroy(r->m); dt_optimizer_destroy(r->opt); }
    if (order == 1) { dt_optimizer_destroy(r->opt); dt_module_destroy(r->m); }
    if (order == 2) { dt_engine_destroy(r->e); r->e = nullptr; }
    if (r->e) OK(dt_engine_train_step(r->e, b.in, b.tg, nullptr));
    if (order != 2) { r->m = nullptr; r->opt = nullptr; }
    delete r;
  }
}

TEST(Model, SgdCosineMicroBatchesOnAOneRankMesh) {
  dt_module* m = tiny_gpt();
  dt_optimizer* opt = nullptr;
  {
    Opts c;
    c.d("lr", 0.3).d("momentum", 0.9);
    ASSERT_EQ(dt_options_set_bool(c.o, "nesterov", 1), DT_OK);
    OK(dt_optimizer_create(m, "sgd", c.o, &opt));
  }
  dt_mesh* mesh = nullptr;
  OK(dt_mesh_create("local", 1, nullptr, &mesh));
  dt_engine* e = nullptr;
  Opts c;
  c.i("micro_batches", 2).d("max_grad_norm", 1.0).s("schedule", "cosine").i("warmup_steps", 2).i("total_steps", 20);
  OK(dt_engine_create(mesh, m, opt, c.o, &e));
  dt_mesh_destroy(mesh);
  dt_module_destroy(m);
  dt_optimizer_destroy(opt);
  Batch b;
  double first = 0, loss = 0;
  OK(dt_engine_train_step(e, b.in, b.tg, &first));
  for (int i = 0; i < 20; ++i) OK(dt_engine_train_step(e, b.in, b.tg, &loss));
  EXPECT_LT(loss, first);
  // Sampling depends only on the seed: two calls agree.
  const int32_t prompt[2] = {1, 2};
  const int64_t len[1] = {2};
  std::vector<int32_t> a(8), z(8);
  int64_t na = 0, nz = 0;
  Opts g;
  g.d("temperature", 1.0).i("top_k", 5).d("top_p", 0.9).i("seed", 11).i("max_new_tokens", 8);
  OK(dt_engine_generate(e, prompt, len, 1, g.o, a.data(), 8, &na));
  OK(dt_engine_generate(e, prompt, len, 1, g.o, z.data(), 8, &nz));
  EXPECT_EQ(a, z);
  dt_engine_destroy(e);

  // Two ranks: data parallel over dp trains (the global batch is split); a cp axis is
  // not trained yet and is refused by name.
  dt_mesh* two = nullptr;
  OK(dt_mesh_create("local", 2, nullptr, &two));
  {
    Rig r;
    dt_engine* dp = nullptr;
    OK(dt_engine_create(two, r.m, r.opt, nullptr, &dp));
    Batch b;
    double l1 = 0, l2 = 0;
    OK(dt_engine_train_step(dp, b.in, b.tg, &l1));
    OK(dt_engine_train_step(dp, b.in, b.tg, &l2));
    EXPECT_LT(l2, l1);
    dt_engine_destroy(dp);
  }
  dt_mesh_destroy(two);
  {  // Pipeline placement without a pp axis would be ignored: refused, naming the option.
    Rig one;
    dt_mesh* dp2 = nullptr;
    Opts dpo;
    dpo.i("dp", 2);
    OK(dt_mesh_create("local", 2, dpo.o, &dp2));
    for (dt_mesh* mesh : {static_cast<dt_mesh*>(nullptr), dp2}) {
      Opts vs;
      vs.i("virtual_stages", 2);
      expect_error(dt_engine_create(mesh, one.m, one.opt, vs.o, &e), DT_ERR_INVALID_ARGUMENT,
                   {"option \"virtual_stages\" = 2", "pp axis is 1", "accepted: with a pp axis >= 2"});
      Opts pb;
      pb.s("pp_blocks", "1,1");
      expect_error(dt_engine_create(mesh, one.m, one.opt, pb.o, &e), DT_ERR_INVALID_ARGUMENT,
                   {"option \"pp_blocks\"", "pp axis is 1", "accepted: with a pp axis >= 2"});
    }
    dt_mesh_destroy(dp2);
  }
  {  // context parallelism through the C API: the losses of one rank (ring attention over cp 2)
    Opts cp;
    cp.i("cp", 2);
    OK(dt_mesh_create("local", 2, cp.o, &two));
    Rig one, r;
    dt_engine* ce = nullptr;
    OK(dt_engine_create(two, r.m, r.opt, nullptr, &ce));
    Batch b;
    for (int i = 0; i < 3; ++i) {
      double want = 0, got = 0;
      OK(dt_engine_train_step(one.e, b.in, b.tg, &want));
      OK(dt_engine_train_step(ce, b.in, b.tg, &got));
      EXPECT_NEAR(got, want, 1e-5 * want) << "step " << i;
    }
    dt_engine_destroy(ce);
    dt_mesh_destroy(two);
  }
  // Two pipeline stages: the schedule is an engine option, its figures in the stats JSON;
  // a schedule or placement it cannot run is refused by name before any work.
  Opts pipe_mesh;
  pipe_mesh.i("pp", 2);
  OK(dt_mesh_create("local", 2, pipe_mesh.o, &two));
  {
    Rig r;
    dt_engine* pe = nullptr;
    Opts bad;
    bad.s("pp_schedule", "pipedream");
    expect_error(dt_engine_create(two, r.m, r.opt, bad.o, &pe), DT_ERR_INVALID_ARGUMENT,
                 {"\"pp_schedule\" = \"pipedream\"", "gpipe, 1f1b, interleaved"});
    Opts blocks;
    blocks.s("pp_blocks", "1,x");
    expect_error(dt_engine_create(two, r.m, r.opt, blocks.o, &pe), DT_ERR_INVALID_ARGUMENT, {"pp_blocks", "\"x\""});
    // A trailing comma or an empty list is refused, not read as "1" or as "balanced".
    for (const char* list : {"1,1,", "", ",", "1,,1"}) {
      Opts b;
      b.s("pp_blocks", list);
      expect_error(dt_engine_create(two, r.m, r.opt, b.o, &pe), DT_ERR_INVALID_ARGUMENT,
                   {"option \"pp_blocks\"", "accepted: comma-separated integers >= 1"});
    }
    Opts po;
    po.s("pp_schedule", "gpipe").i("micro_batches", 2);
    OK(dt_engine_create(two, r.m, r.opt, po.o, &pe));
    Batch b;
    double l1 = 0, l2 = 0;
    OK(dt_engine_train_step(pe, b.in, b.tg, &l1));
    OK(dt_engine_train_step(pe, b.in, b.tg, &l2));
    EXPECT_LT(l2, l1);
    char buf[2048];
    size_t n = 0;
    OK(dt_engine_last_stats_json(pe, buf, sizeof buf, &n));
    EXPECT_NE(std::string(buf).find("\"bubble_fraction\""), std::string::npos) << buf;
    dt_engine_destroy(pe);
  }
  dt_mesh_destroy(two);
  {  // The schedule alone, as data: each rank's actions, the simulated bubble and peaks.
    Opts so;
    so.i("pp", 2).i("micro_batches", 4).s("pp_schedule", "gpipe");
    std::vector<char> buf(1 << 16);
    size_t n = 0;
    OK(dt_pipeline_schedule_json(so.o, buf.data(), buf.size(), &n));
    const std::string j(buf.data());
    for (const char* want : {"\"actions\":[[\"F0\",\"sendA0\"", "\"activation_peak\":[4,4]", "\"bubble_formula\":0.2"})
      EXPECT_NE(j.find(want), std::string::npos) << want << " in " << j;
    Opts bad;
    bad.i("pp", 2).i("micro_batches", 3).s("pp_schedule", "interleaved").i("virtual_stages", 2);
    expect_error(dt_pipeline_schedule_json(bad.o, buf.data(), buf.size(), &n), DT_ERR_INVALID_ARGUMENT,
                 {"micro_batches = 3", "interleaved"});
    // In range each, too big together: refused at once (it took 45 s and 8.6 GB), with the
    // bound dt_plan_json applies to the same simulation.
    Opts huge;
    huge.i("pp", 1024).i("micro_batches", 8192);
    expect_error(dt_pipeline_schedule_json(huge.o, buf.data(), buf.size(), &n), DT_ERR_INVALID_ARGUMENT,
                 {"\"pp\" (1024)", "\"micro_batches\" (8192)", "at most 1048576"});
    Opts top;
    top.i("pp", 1024).i("micro_batches", 65536).i("virtual_stages", 64).s("pp_schedule", "interleaved");
    expect_error(dt_pipeline_schedule_json(top.o, buf.data(), buf.size(), &n), DT_ERR_INVALID_ARGUMENT,
                 {"at most 1048576"});
  }
  dt_module* mlp = nullptr;
  Opts mc;
  mc.s("sizes", "4,8,2");
  OK(dt_module_create_mlp(mc.o, &mlp));
  OK(dt_optimizer_create(mlp, "sgd", nullptr, &opt));
  expect_error(dt_engine_create(nullptr, mlp, opt, nullptr, &e), DT_ERR_INVALID_ARGUMENT, {"module", "GPT"});
  dt_optimizer_destroy(opt);
  dt_module_destroy(mlp);
}

// "precision" picks the storage dtype of a GPT; f16 engines loss-scale (the stats say at
// which scale), and bad values name the key and list what is accepted.
TEST(Model, PrecisionKey) {
  dt_module* m = nullptr;
  { Opts c; c.s("precision", "fp8"); expect_error(dt_module_create_gpt(c.o, &m), DT_ERR_INVALID_ARGUMENT, {"precision", "fp8", "\"f32\"", "\"bf16\"", "\"f16\""}); }
  EXPECT_EQ(m, nullptr);
  for (const char* p : {"bf16", "f16"}) {
    Opts c;
    c.s("preset", "gpt-tiny").i("vocab_size", kVocab).i("context", 32).s("precision", p);
    OK(dt_module_create_gpt(c.o, &m));
    dt_tensor* w = nullptr;
    OK(dt_module_param(m, "wte.weight", &w));
    dt_dtype dt = DT_F32;
    OK(dt_tensor_dtype(w, &dt));
    EXPECT_EQ(dt, std::string(p) == "bf16" ? DT_BF16 : DT_F16);
    dt_tensor_destroy(w);
    dt_optimizer* opt = nullptr;
    OK(dt_optimizer_create(m, "adamw", nullptr, &opt));
    dt_engine* e = nullptr;
    { Opts eo; eo.d("loss_scale_init", 0); expect_error(dt_engine_create(nullptr, m, opt, eo.o, &e), DT_ERR_INVALID_ARGUMENT, {"loss_scale_init", "> 0"}); }
    { Opts eo; eo.i("loss_scale_growth_interval", 0); expect_error(dt_engine_create(nullptr, m, opt, eo.o, &e), DT_ERR_INVALID_ARGUMENT, {"loss_scale_growth_interval", ">= 1"}); }
    Opts eo;
    eo.d("loss_scale_init", 512).i("loss_scale_growth_interval", 100);
    OK(dt_engine_create(nullptr, m, opt, eo.o, &e));
    Batch b;
    double loss = 0;
    OK(dt_engine_train_step(e, b.in, b.tg, &loss));
    EXPECT_TRUE(std::isfinite(loss)) << p;
    char json[512];
    size_t needed = 0;
    OK(dt_engine_last_stats_json(e, json, sizeof json, &needed));
    const std::string want = std::string(p) == "f16" ? "\"loss_scale\":512.0" : "\"loss_scale\":1.0";
    EXPECT_NE(std::string(json).find(want), std::string::npos) << json;
    EXPECT_NE(std::string(json).find("\"skipped\":false"), std::string::npos) << json;
    dt_engine_destroy(e);
    dt_optimizer_destroy(opt);
    dt_module_destroy(m);
    m = nullptr;
  }
}

// "device": a bad name is INVALID_ARGUMENT naming the accepted forms; a GPU this build or
// machine lacks is UNSUPPORTED, saying why; either way no module is made.
TEST(Model, DeviceKey) {
  dt_module* m = nullptr;
  { Opts c; c.s("device", "gpu0"); expect_error(dt_module_create_gpt(c.o, &m), DT_ERR_INVALID_ARGUMENT, {"device", "gpu0", "\"cpu\"", "\"cuda:N\""}); }
  EXPECT_EQ(m, nullptr);
  int32_t gpus = 0;
  OK(dt_device_count("cuda", &gpus));
  { Opts c; c.s("preset", "gpt-tiny").s("device", "cuda:999"); expect_error(dt_module_create_gpt(c.o, &m), DT_ERR_UNSUPPORTED, {"cuda:999", "not available"}); }
  EXPECT_EQ(m, nullptr);
  Opts c;
  c.s("preset", "gpt-tiny").s("device", "cpu");
  OK(dt_module_create_gpt(c.o, &m));
  dt_module_destroy(m);
}

// "offload" moves a GPU model's optimizer state to the host; on a CPU model it changes
// nothing: the same losses, bit for bit.
TEST(Model, OffloadOnACpuModelChangesNothing) {
  std::vector<double> runs[2];
  for (int off = 0; off < 2; ++off) {
    dt_module* m = nullptr;
    Opts c;
    c.s("preset", "gpt-tiny").i("vocab_size", kVocab).i("context", 32);
    OK(dt_module_create_gpt(c.o, &m));
    dt_optimizer* opt = nullptr;
    Opts oo;
    oo.b("offload", off == 1);
    OK(dt_optimizer_create(m, "adamw", oo.o, &opt));
    dt_engine* e = nullptr;
    OK(dt_engine_create(nullptr, m, opt, nullptr, &e));
    Batch b;
    for (int i = 0; i < 3; ++i) {
      double loss = 0;
      OK(dt_engine_train_step(e, b.in, b.tg, &loss));
      runs[off].push_back(loss);
    }
    dt_engine_destroy(e);
    dt_optimizer_destroy(opt);
    dt_module_destroy(m);
  }
  EXPECT_EQ(runs[0], runs[1]);
  dt_module* m = nullptr;
  OK(dt_module_create_gpt(nullptr, &m));
  dt_optimizer* opt = nullptr;
  { Opts oo; oo.i("offload", 2); expect_error(dt_optimizer_create(m, "sgd", oo.o, &opt), DT_ERR_INVALID_ARGUMENT, {"offload"}); }
  dt_module_destroy(m);
}

TEST(Model, BadInputsAreNamed) {
  dt_module* m = nullptr;
  { Opts c; c.i("n_layers", 2); expect_error(dt_module_create_gpt(c.o, &m), DT_ERR_INVALID_ARGUMENT, {"n_layers", "n_layer"}); }
  { Opts c; c.s("preset", "gpt-huge"); expect_error(dt_module_create_gpt(c.o, &m), DT_ERR_INVALID_ARGUMENT, {"gpt-huge", "gpt-tiny", "gpt-small"}); }
  { Opts c; c.s("norm", "batchnorm"); expect_error(dt_module_create_gpt(c.o, &m), DT_ERR_INVALID_ARGUMENT, {"norm", "rmsnorm"}); }
  { Opts c; c.i("d_model", 0); expect_error(dt_module_create_gpt(c.o, &m), DT_ERR_INVALID_ARGUMENT, {"d_model"}); }
  { Opts c; c.s("vocab_size", "big"); expect_error(dt_module_create_gpt(c.o, &m), DT_ERR_INVALID_ARGUMENT, {"vocab_size"}); }
  { Opts c; c.s("sizes", "4,x,1"); expect_error(dt_module_create_mlp(c.o, &m), DT_ERR_INVALID_ARGUMENT, {"sizes"}); }
  expect_error(dt_module_create_mlp(nullptr, &m), DT_ERR_INVALID_ARGUMENT, {"sizes"});
  expect_error(dt_module_create_gpt(nullptr, nullptr), DT_ERR_INVALID_ARGUMENT, {"out"});
  EXPECT_EQ(m, nullptr);

  Rig r;
  dt_optimizer* o = nullptr;
  expect_error(dt_optimizer_create(r.m, "lion", nullptr, &o), DT_ERR_INVALID_ARGUMENT, {"kind", "adamw", "sgd"});
  { Opts c; c.d("momentum", 0.9); expect_error(dt_optimizer_create(r.m, "adamw", c.o, &o), DT_ERR_INVALID_ARGUMENT, {"momentum"}); }
  { Opts c; c.d("lr", -1); expect_error(dt_optimizer_create(r.m, "sgd", c.o, &o), DT_ERR_INVALID_ARGUMENT, {"lr"}); }
  expect_error(dt_optimizer_create(nullptr, "sgd", nullptr, &o), DT_ERR_INVALID_ARGUMENT, {"module"});
  dt_engine* e = nullptr;
  { Opts c; c.s("schedule", "step"); expect_error(dt_engine_create(nullptr, r.m, r.opt, c.o, &e), DT_ERR_INVALID_ARGUMENT, {"schedule", "cosine"}); }
  { Opts c; c.s("schedule", "cosine").i("total_steps", 0); expect_error(dt_engine_create(nullptr, r.m, r.opt, c.o, &e), DT_ERR_INVALID_ARGUMENT, {"total_steps"}); }
  expect_error(dt_engine_create(nullptr, r.m, nullptr, nullptr, &e), DT_ERR_INVALID_ARGUMENT, {"optimizer"});
  dt_module* other = tiny_gpt();
  expect_error(dt_engine_create(nullptr, other, r.opt, nullptr, &e), DT_ERR_INVALID_ARGUMENT, {"optimizer"});
  dt_module_destroy(other);
  EXPECT_EQ(e, nullptr);

  Batch b;
  double loss = 0;
  std::vector<int32_t> bad(kB * kT, 1);
  bad[3] = static_cast<int32_t>(kVocab);
  dt_tensor* big = ids(bad);
  expect_error(dt_engine_train_step(r.e, big, b.tg, nullptr), DT_ERR_INVALID_ARGUMENT, {"inputs", "vocab_size"});
  dt_tensor* f = ids({}, DT_F32);
  expect_error(dt_engine_train_step(r.e, f, b.tg, nullptr), DT_ERR_INVALID_ARGUMENT, {"inputs", "f32", "i32"});
  expect_error(dt_engine_eval(r.e, b.in, b.tg, nullptr), DT_ERR_INVALID_ARGUMENT, {"loss_out"});
  expect_error(dt_engine_eval(r.e, b.in, f, &loss), DT_ERR_INVALID_ARGUMENT, {"targets", "f32"});
  expect_error(dt_engine_train_step(r.e, b.in, nullptr, nullptr), DT_ERR_INVALID_ARGUMENT, {"targets"});
  expect_error(dt_engine_train_step(nullptr, b.in, b.tg, nullptr), DT_ERR_INVALID_ARGUMENT, {"engine"});
  dt_tensor_destroy(big);
  dt_tensor_destroy(f);

  const int32_t prompt[2] = {1, static_cast<int32_t>(kVocab)};
  const int64_t len[1] = {2};
  int32_t out[16];
  int64_t out_len[1] = {-1};
  expect_error(dt_engine_generate(r.e, prompt, len, 1, nullptr, out, 16, out_len), DT_ERR_INVALID_ARGUMENT, {"prompt_tokens[1]", "vocab_size"});
  expect_error(dt_engine_generate(r.e, prompt, len, 1, nullptr, out, 2, out_len), DT_ERR_INVALID_ARGUMENT, {"out_capacity_per_prompt"});
  { Opts c; c.d("top_p", 0); expect_error(dt_engine_generate(r.e, prompt, len, 1, c.o, out, 16, out_len), DT_ERR_INVALID_ARGUMENT, {"top_p"}); }
  expect_error(dt_engine_generate(r.e, nullptr, len, 1, nullptr, out, 16, out_len), DT_ERR_INVALID_ARGUMENT, {"prompt_tokens"});
  EXPECT_EQ(out_len[0], -1);
  expect_error(dt_engine_save(r.e, nullptr), DT_ERR_INVALID_ARGUMENT, {"path_stem"});
}

}  // namespace

namespace DT_TEST_NS {

// ZeRO through the C API: option "zero" on a dp mesh, each rank's own memory ledger, the
// wire bytes per collective, generation from sharded weights, and the released host
// optimizer refusing to step by itself.
TEST(Model, ZeroStagesThroughTheCApi) {
  dt_mesh* two = nullptr;
  OK(dt_mesh_create("local", 2, nullptr, &two));
  for (int zero : {1, 2, 3}) {
    Rig r;
    Opts eo;
    eo.i("zero", zero);
    dt_engine* z = nullptr;
    OK(dt_engine_create(two, r.m, r.opt, eo.o, &z));
    Batch b;
    double l1 = 0, l2 = 0;
    OK(dt_engine_train_step(z, b.in, b.tg, &l1));
    OK(dt_engine_train_step(z, b.in, b.tg, &l2));
    EXPECT_LT(l2, l1) << "zero " << zero;
    int64_t p0 = 0, p1 = 0, o0 = 0, o1 = 0, params = 0;
    OK(dt_module_param_count(r.m, &params));
    OK(dt_memory_rank_stats("cpu", 0, DT_MEM_PARAM, &p0, nullptr));
    OK(dt_memory_rank_stats("cpu", 1, DT_MEM_PARAM, &p1, nullptr));
    OK(dt_memory_rank_stats("cpu", 0, DT_MEM_OPTIMIZER, &o0, nullptr));
    OK(dt_memory_rank_stats("cpu", 1, DT_MEM_OPTIMIZER, &o1, nullptr));
    EXPECT_EQ(p0, p1) << "zero " << zero;
    EXPECT_GE(p0, zero == 3 ? 4 * params / 2 : 4 * params) << "zero " << zero;
    EXPECT_LT(o1, 8 * params / 2 + 64) << "zero " << zero << ": rank 1's optimizer state is not a shard";
    int64_t wire = 0;
    OK(dt_mesh_comm_wire_bytes(two, 0, "dp", "reduce_scatter", &wire));
    EXPECT_GT(wire, 0);
    std::vector<int32_t> out = greedy(z);  // ZeRO-3 gathers the blocks for it
    EXPECT_EQ(out.size(), 16u);
    expect_error(dt_optimizer_step(r.opt), DT_ERR_INVALID_ARGUMENT, {"released", "ZeRO"});
    dt_engine_destroy(z);
  }
  Rig r;
  Opts bad;
  bad.i("zero", 4);
  dt_engine* z = nullptr;
  expect_error(dt_engine_create(two, r.m, r.opt, bad.o, &z), DT_ERR_INVALID_ARGUMENT, {"\"zero\" = 4", "0 (DDP", "1, 2 or 3"});
  Opts mixed;
  mixed.i("zero", 2).i("bucket_bytes", 1 << 20);
  expect_error(dt_engine_create(two, r.m, r.opt, mixed.o, &z), DT_ERR_INVALID_ARGUMENT, {"\"bucket_bytes\"", "DDP", "\"zero\" = 2"});
  int64_t cur = 0;
  expect_error(dt_memory_rank_stats("cpu", -1, DT_MEM_PARAM, &cur, nullptr), DT_ERR_INVALID_ARGUMENT, {"rank = -1", "0 to 1023"});
  dt_mesh_destroy(two);
}

}  // namespace
