// Datasets, loaders, checkpoints seen from outside, and streaming generation through the C
// ABI: what the dtrain command line is built on, so a Go or Java host can do the same.
#include <unistd.h>

#include <filesystem>
#include <set>
#include <fstream>
#include <vector>

#include "abi_util.h"

namespace DT_TEST_NS {

std::string temp_dir(const char* name) {
  std::string d = ::testing::TempDir() + "dtrain_api_data_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

dt_dataset* addition(int64_t digits, int64_t size, int64_t seed, const char* split) {
  Opts o;
  o.i("digits", digits).i("size", size).i("seed", seed).s("split", split);
  dt_dataset* d = nullptr;
  EXPECT_EQ(dt_dataset_create("addition", o.o, &d), DT_OK) << dt_last_error_message();
  return d;
}

dt_tensor* batch_tensor(int64_t rows, int64_t cols, dt_dtype dtype = DT_I32) {
  int64_t shape[2] = {rows, cols};
  dt_tensor* t = nullptr;
  EXPECT_EQ(dt_tensor_create(dtype, shape, 2, "cpu", nullptr, &t), DT_OK);
  return t;
}

std::string text(const int32_t* t, int64_t n) {
  std::string s;
  for (int64_t i = 0; i < n; ++i) s += t[i] >= 0 ? static_cast<char>(t[i]) : '_';
  return s;
}

TEST(Dataset, AdditionExamplesAndTheirTargets) {
  dt_dataset* d = addition(3, 50, 1, "all");
  int64_t size = 0, T = 0;
  OK(dt_dataset_size(d, &size));
  OK(dt_dataset_context(d, &T));
  EXPECT_EQ(size, 50);
  EXPECT_EQ(T, 12);  // "abc+def=" + the sum's 4 digits and "\n", less the last as input
  std::vector<int32_t> in(T), tg(T);
  OK(dt_dataset_example(d, 0, in.data(), tg.data()));
  const std::string s = text(in.data(), T);
  ASSERT_EQ(s.size(), 12u);
  EXPECT_EQ(s[3], '+');
  EXPECT_EQ(s[7], '=');
  const int a = std::stoi(s.substr(0, 3)), b = std::stoi(s.substr(4, 3));
  char want[8];
  std::snprintf(want, sizeof want, "%04d\n", a + b);
  // Only the answer is a target: -1 up to "=", then the sum's digits and the newline.
  EXPECT_EQ(text(tg.data(), T), std::string(7, '_') + want) << s;
  expect_error(dt_dataset_example(d, 50, in.data(), tg.data()), DT_ERR_INVALID_ARGUMENT, {"index", "0 to 49"});
  dt_dataset_destroy(d);
}

TEST(Dataset, HeldOutProblemsNeverAppearInTraining) {
  dt_dataset *train = addition(2, 4000, 3, "train"), *test = addition(2, 300, 4, "test");
  std::vector<int32_t> in(9), tg(9);
  std::set<std::string> seen, held;
  for (int64_t i = 0; i < 4000; ++i) {
    OK(dt_dataset_example(train, i, in.data(), tg.data()));
    seen.insert(text(in.data(), 6));
  }
  for (int64_t i = 0; i < 300; ++i) {
    OK(dt_dataset_example(test, i, in.data(), tg.data()));
    held.insert(text(in.data(), 6));
  }
  // 4000 draws cover most of the 9000 non-held-out 2-digit problems, and none of the rest.
  EXPECT_GT(seen.size(), 3000u);
  EXPECT_GT(held.size(), 200u);
  for (const std::string& p : held) EXPECT_EQ(seen.count(p), 0u) << p << " is in both splits";
  dt_dataset_destroy(train);
  dt_dataset_destroy(test);
}

TEST(Dataset, BadInputIsANamedError) {
  dt_dataset* d = nullptr;
  expect_error(dt_dataset_create("csv", nullptr, &d), DT_ERR_INVALID_ARGUMENT, {"kind", "\"text\"", "\"addition\""});
  expect_error(dt_dataset_create("text", nullptr, &d), DT_ERR_INVALID_ARGUMENT, {"\"path\"", "required"});
  {
    Opts o;
    o.s("path", "/nonexistent/file.txt").i("context", 8);
    expect_error(dt_dataset_create("text", o.o, &d), DT_ERR_IO, {"/nonexistent/file.txt"});
  }
  const std::string dir = temp_dir("bad");
  { std::ofstream(dir + "/short.txt") << "abc"; }
  {
    Opts o;
    o.s("path", (dir + "/short.txt").c_str()).i("context", 8);
    expect_error(dt_dataset_create("text", o.o, &d), DT_ERR_INVALID_ARGUMENT, {"short.txt", "at least"});
  }
  { std::ofstream(dir + "/odd.bin", std::ios::binary) << "abcde"; }
  {
    Opts o;
    o.s("path", (dir + "/odd.bin").c_str()).i("context", 1).i("width", 2);
    expect_error(dt_dataset_create("tokens", o.o, &d), DT_ERR_IO, {"not a multiple"});
  }
  {
    Opts o;
    o.i("digits", 0);
    expect_error(dt_dataset_create("addition", o.o, &d), DT_ERR_INVALID_ARGUMENT, {"digits", "1 to 18"});
  }
  {
    Opts o;
    o.s("split", "dev");
    expect_error(dt_dataset_create("addition", o.o, &d), DT_ERR_INVALID_ARGUMENT, {"split", "\"test\""});
  }
  for (int64_t size : {int64_t(0), (int64_t(1) << 32) + 1, int64_t(1) << 40, INT64_MAX}) {  // refused up front
    Opts o;
    o.i("size", size);
    expect_error(dt_dataset_create("addition", o.o, &d), DT_ERR_INVALID_ARGUMENT, {"\"size\"", "1 to 4294967296"});
  }
  EXPECT_EQ(d, nullptr);
  std::filesystem::remove_all(dir);
}

// 2^32 examples need 32 GiB of epoch order in a loader: on a machine with less memory that
// is refused at dt_loader_create, with the figures, rather than failing at the first batch.
TEST(Loader, AnOrderLargerThanMemoryIsRefusedUpFront) {
  const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  if (8.0 * 4294967296.0 <= memory) GTEST_SKIP() << "this machine can hold 2^32 examples' order";
  dt_dataset* d = addition(2, int64_t(1) << 32, 1, "train");
  Opts lo;
  lo.i("batch", 4);
  dt_loader* l = nullptr;
  expect_error(dt_loader_create(d, lo.o, &l), DT_ERR_OUT_OF_MEMORY, {"4294967296 examples", "bytes of memory"});
  EXPECT_EQ(l, nullptr);
  dt_dataset_destroy(d);
}

TEST(Loader, BatchesCoverAnEpochAndSeekReplaysThem) {
  const std::string dir = temp_dir("loader");
  { std::ofstream(dir + "/t.txt") << std::string(8 * 10 + 1, 'x'); }
  Opts o;
  o.s("path", (dir + "/t.txt").c_str()).i("context", 8);
  dt_dataset* d = nullptr;
  OK(dt_dataset_create("text", o.o, &d));
  Opts lo;
  lo.i("batch", 3).i("seed", 9);
  dt_loader* l = nullptr;
  OK(dt_loader_create(d, lo.o, &l));
  dt_dataset_destroy(d);  // the loader keeps the data alive
  int64_t per = 0, epoch = -1, pos = -1;
  OK(dt_loader_batches_per_epoch(l, &per));
  EXPECT_EQ(per, 3);  // 10 examples in batches of 3: the last partial batch is dropped
  dt_tensor *in = batch_tensor(3, 8), *tg = batch_tensor(3, 8);
  std::vector<std::vector<int32_t>> seen;
  for (int k = 0; k < 4; ++k) {
    OK(dt_loader_next(l, in, tg));
    std::vector<int32_t> v(24);
    OK(dt_tensor_copy_to_host(in, v.data(), v.size() * 4));
    seen.push_back(v);
  }
  OK(dt_loader_position(l, &epoch, &pos));
  EXPECT_EQ(epoch, 1);
  EXPECT_EQ(pos, 1);
  OK(dt_loader_seek(l, 1, 0));  // replays the 4th batch
  OK(dt_loader_next(l, in, tg));
  std::vector<int32_t> again(24);
  OK(dt_tensor_copy_to_host(in, again.data(), again.size() * 4));
  EXPECT_EQ(again, seen[3]);

  dt_tensor* wrong = batch_tensor(2, 8);
  expect_error(dt_loader_next(l, wrong, tg), DT_ERR_INVALID_ARGUMENT, {"inputs", "i32 [3, 8]"});
  dt_tensor* f32 = batch_tensor(3, 8, DT_F32);
  expect_error(dt_loader_next(l, in, f32), DT_ERR_INVALID_ARGUMENT, {"targets", "i32 [3, 8]"});
  expect_error(dt_loader_seek(l, 0, 3), DT_ERR_INVALID_ARGUMENT, {"batch_index", "0 to 2"});
  // Epochs stop at 2^62: counting on from the last accepted one never overflows.
  expect_error(dt_loader_seek(l, INT64_MAX, 2), DT_ERR_INVALID_ARGUMENT, {"epoch", "0 to 2^62"});
  OK(dt_loader_seek(l, int64_t{1} << 62, 2));
  OK(dt_loader_next(l, in, tg));
  int64_t far_epoch = -1, far_index = -1;
  OK(dt_loader_position(l, &far_epoch, &far_index));
  EXPECT_EQ(far_epoch, (int64_t{1} << 62) + 1);
  EXPECT_EQ(far_index, 0);
  dt_tensor_destroy(wrong);
  dt_tensor_destroy(f32);
  dt_tensor_destroy(in);
  dt_tensor_destroy(tg);
  dt_loader_destroy(l);

  OK(dt_dataset_create("text", o.o, &d));
  Opts big;
  big.i("batch", 11);
  expect_error(dt_loader_create(d, big.o, &l), DT_ERR_INVALID_ARGUMENT, {"batch", "1 to 10"});
  expect_error(dt_loader_create(d, nullptr, &l), DT_ERR_INVALID_ARGUMENT, {"batch", "required"});
  dt_dataset_destroy(d);
  std::filesystem::remove_all(dir);
}

// A trained engine on a tiny model, with its optimizer and module.
struct Trained {
  dt_module* m = nullptr;
  dt_optimizer* opt = nullptr;
  dt_engine* e = nullptr;
  explicit Trained(const char* norm, int steps) {
    Opts c;
    c.s("preset", "gpt-tiny").i("context", 13).i("seed", 3).s("norm", norm);
    EXPECT_EQ(dt_module_create_gpt(c.o, &m), DT_OK) << dt_last_error_message();
    Opts oo;
    oo.d("lr", 3e-3);
    EXPECT_EQ(dt_optimizer_create(m, "adamw", oo.o, &opt), DT_OK);
    EXPECT_EQ(dt_engine_create(nullptr, m, opt, nullptr, &e), DT_OK) << dt_last_error_message();
    dt_dataset* d = addition(3, 1000, 1, "train");
    Opts lo;
    lo.i("batch", 8);
    dt_loader* l = nullptr;
    EXPECT_EQ(dt_loader_create(d, lo.o, &l), DT_OK);
    dt_tensor *in = batch_tensor(8, 12), *tg = batch_tensor(8, 12);
    for (int s = 0; s < steps; ++s) {
      EXPECT_EQ(dt_loader_next(l, in, tg), DT_OK);
      EXPECT_EQ(dt_engine_train_step(e, in, tg, nullptr), DT_OK) << dt_last_error_message();
    }
    dt_tensor_destroy(in);
    dt_tensor_destroy(tg);
    dt_loader_destroy(l);
    dt_dataset_destroy(d);
  }
  ~Trained() {
    dt_engine_destroy(e);
    dt_optimizer_destroy(opt);
    dt_module_destroy(m);
  }
};

struct Streamed {
  std::vector<std::pair<int32_t, int32_t>> calls;
};
void on_token(void* user, int32_t prompt, int32_t token) { static_cast<Streamed*>(user)->calls.emplace_back(prompt, token); }

TEST(Checkpoint, ModelFromCheckpointGeneratesWhatTheTrainedOneDid) {
  Trained t("layernorm", 5);
  int64_t step = 0;
  OK(dt_engine_step(t.e, &step));
  EXPECT_EQ(step, 5);
  const std::string stem = temp_dir("ckpt") + "/run";
  OK(dt_engine_save(t.e, stem.c_str()));

  size_t needed = 0;
  OK(dt_checkpoint_info_json(stem.c_str(), nullptr, 0, &needed));
  std::string info(needed, '\0');
  OK(dt_checkpoint_info_json(stem.c_str(), info.data(), info.size(), &needed));
  EXPECT_NE(info.find("\"norm\":\"layernorm\""), std::string::npos) << info;
  EXPECT_NE(info.find("\"step\":5"), std::string::npos) << info;

  dt_module* m = nullptr;
  OK(dt_module_create_from_checkpoint(stem.c_str(), &m));
  dt_optimizer* o = nullptr;
  OK(dt_optimizer_create(m, "sgd", nullptr, &o));
  dt_engine* e = nullptr;
  OK(dt_engine_create(nullptr, m, o, nullptr, &e));
  OK(dt_engine_load(e, stem.c_str()));
  OK(dt_engine_step(e, &step));
  EXPECT_EQ(step, 5);

  // Two prompts, streamed: the callback sees every token, in order, per prompt.
  const int32_t prompt[] = {'1', '2', '3', '+', '4', '5', '6', '=', '9', '+'};
  const int64_t lens[2] = {8, 2};
  Opts g;
  g.i("max_new_tokens", 5);
  std::vector<int32_t> want(10), got(10);
  int64_t want_len[2], got_len[2];
  OK(dt_engine_generate(t.e, prompt, lens, 2, g.o, want.data(), 5, want_len));
  Streamed s;
  OK(dt_engine_generate_stream(e, prompt, lens, 2, g.o, on_token, &s, got.data(), 5, got_len));
  EXPECT_EQ(got, want);
  ASSERT_EQ(s.calls.size(), 10u);
  std::vector<int32_t> per[2];
  for (auto [p, tok] : s.calls) per[p].push_back(tok);
  EXPECT_EQ(per[0], std::vector<int32_t>(want.begin(), want.begin() + 5));
  EXPECT_EQ(per[1], std::vector<int32_t>(want.begin() + 5, want.end()));
  OK(dt_engine_last_generate_stats_json(e, nullptr, 0, &needed));
  std::string stats(needed, '\0');
  OK(dt_engine_last_generate_stats_json(e, stats.data(), stats.size(), &needed));
  EXPECT_NE(stats.find("\"new_tokens\":10"), std::string::npos) << stats;
  expect_error(dt_engine_generate_stream(e, prompt, lens, 2, g.o, nullptr, nullptr, got.data(), 5, got_len),
               DT_ERR_INVALID_ARGUMENT, {"on_token"});

  dt_engine_destroy(e);
  dt_optimizer_destroy(o);
  dt_module_destroy(m);
  std::filesystem::remove_all(stem.substr(0, stem.rfind('/')));
}

TEST(Checkpoint, AnotherModelConfigIsRefusedAndNothingChanges) {
  Trained a("layernorm", 2), b("rmsnorm", 0);  // same shapes for every tensor but no norm bias
  const std::string stem = temp_dir("mismatch") + "/run";
  OK(dt_engine_save(a.e, stem.c_str()));
  expect_error(dt_engine_load(b.e, stem.c_str()), DT_ERR_INVALID_ARGUMENT, {"norm", "\"layernorm\"", "\"rmsnorm\""});
  int64_t step = -1;
  OK(dt_engine_step(b.e, &step));
  EXPECT_EQ(step, 0);
  dt_module* m = nullptr;
  expect_error(dt_module_create_from_checkpoint("/nonexistent/run", &m), DT_ERR_IO, {"/nonexistent/run.index.json"});
  expect_error(dt_module_create_from_checkpoint("", &m), DT_ERR_INVALID_ARGUMENT, {"path_stem"});
  EXPECT_EQ(m, nullptr);
  std::filesystem::remove_all(stem.substr(0, stem.rfind('/')));
}

}  // namespace
