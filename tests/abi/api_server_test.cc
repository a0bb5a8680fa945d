// dt_server through the public header: host threads submit at once, with callbacks and by
// polling, and each request's tokens equal dt_engine_generate's for its prompt alone; a
// cancel ends a request at once; drain refuses new requests (DT_ERR_UNAVAILABLE); the
// statistics and metrics report it all; bad arguments name themselves; on a tp 2 mesh too.
#include <atomic>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "abi_util.h"

namespace DT_TEST_NS {

constexpr int64_t kVocab = 40;

dt_module* model() {
  Opts c;
  c.s("preset", "gpt-tiny").i("vocab_size", kVocab).i("context", 48).i("seed", 3);
  dt_module* m = nullptr;
  EXPECT_EQ(dt_module_create_gpt(c.o, &m), DT_OK) << dt_last_error_message();
  return m;
}

std::vector<int32_t> prompt(int i) {
  std::vector<int32_t> p;
  for (int j = 0; j < 3 + i % 5; ++j) p.push_back(static_cast<int32_t>((i * 7 + j * 3) % kVocab));
  return p;
}

std::vector<int32_t> generate(dt_module* m, const std::vector<int32_t>& p, int64_t n, int64_t seed) {
  dt_optimizer* o = nullptr;
  dt_engine* e = nullptr;
  EXPECT_EQ(dt_optimizer_create(m, "sgd", nullptr, &o), DT_OK);
  EXPECT_EQ(dt_engine_create(nullptr, m, o, nullptr, &e), DT_OK);
  Opts g;
  g.i("max_new_tokens", n).d("temperature", 0.8).i("seed", seed);
  std::vector<int32_t> out(static_cast<size_t>(n));
  int64_t len = static_cast<int64_t>(p.size()), got = 0;
  EXPECT_EQ(dt_engine_generate(e, p.data(), &len, 1, g.o, out.data(), n, &got), DT_OK) << dt_last_error_message();
  out.resize(static_cast<size_t>(got));
  dt_engine_destroy(e);
  dt_optimizer_destroy(o);
  return out;
}

struct Collected {
  std::mutex mu;
  std::map<int64_t, std::vector<int32_t>> tokens;
  std::map<int64_t, int32_t> end_state;
};

void on_event(void* user, int64_t id, int32_t token, int32_t done, int32_t state, const char*) {
  auto& c = *static_cast<Collected*>(user);
  std::lock_guard<std::mutex> lk(c.mu);
  if (token >= 0) c.tokens[id].push_back(token);
  if (done) c.end_state[id] = state;
}

std::string stats(dt_server* s) {
  size_t n = 0;
  EXPECT_EQ(dt_server_stats_json(s, nullptr, 0, &n), DT_OK);
  std::string t(n, '\0');
  EXPECT_EQ(dt_server_stats_json(s, t.data(), n, &n), DT_OK);
  return t;
}

void serve_from_threads(dt_mesh* mesh) {
  dt_module* m = model();
  dt_server* s = nullptr;
  Opts so;
  so.i("block_size", 4).i("kv_blocks", 24).i("max_num_seqs", 4).i("max_batched_tokens", 8);
  int64_t kv_before = 0;
  OK(dt_memory_stats("cpu", DT_MEM_KV_CACHE, &kv_before, nullptr));
  OK(dt_server_create(mesh, m, so.o, &s));
  {  // the pool is in the memory ledger as kv_cache: 24 blocks on each rank
    int64_t kv = 0;
    OK(dt_memory_stats("cpu", DT_MEM_KV_CACHE, &kv, nullptr));
    const std::string st = stats(s);
    const size_t at = st.find("\"bytes_per_block\":");
    ASSERT_NE(at, std::string::npos) << st;
    const int64_t per_block = std::atoll(st.c_str() + at + 18);
    int32_t ranks = 1;
    if (mesh) OK(dt_mesh_world_size(mesh, &ranks));
    EXPECT_EQ(kv - kv_before, 24 * per_block * ranks) << st;
  }
  Collected got;
  std::map<int, std::vector<int32_t>> polled;
  std::map<int, int64_t> ids;
  std::mutex mu;
  std::vector<std::thread> hosts;
  for (int t = 0; t < 4; ++t)
    hosts.emplace_back([&, t] {
      for (int r = 0; r < 3; ++r) {
        const int i = t * 3 + r;
        const std::vector<int32_t> p = prompt(i);
        Opts o;
        o.i("max_tokens", 6).d("temperature", 0.8).i("seed", i);
        int64_t id = 0;
        const bool poll = i % 2 == 0;
        EXPECT_EQ(dt_server_submit(s, p.data(), static_cast<int64_t>(p.size()), o.o, poll ? nullptr : on_event, &got, &id),
                  DT_OK) << dt_last_error_message();
        { std::lock_guard<std::mutex> lk(mu); ids[i] = id; }
        if (!poll) continue;
        std::vector<int32_t> mine;
        for (int32_t done = 0, state = 0; !done;) {
          int32_t buf[4];
          int64_t n = 0;
          ASSERT_EQ(dt_server_poll(s, id, buf, 4, &n, &state, &done, 1000), DT_OK) << dt_last_error_message();
          mine.insert(mine.end(), buf, buf + n);
          if (done) EXPECT_EQ(state, DT_REQUEST_FINISHED);
        }
        std::lock_guard<std::mutex> lk(mu);
        polled[i] = mine;
      }
    });
  for (auto& h : hosts) h.join();
  OK(dt_server_drain(s, 30000));
  for (int i = 0; i < 12; ++i) {
    const std::vector<int32_t> want = generate(m, prompt(i), 6, i);
    if (i % 2 == 0) {
      EXPECT_EQ(polled[i], want) << "polled request " << i;
    } else {
      std::lock_guard<std::mutex> lk(got.mu);
      EXPECT_EQ(got.tokens[ids[i]], want) << "request " << i << " by callback";
      EXPECT_EQ(got.end_state[ids[i]], DT_REQUEST_FINISHED);
    }
  }
  // Draining: new requests are refused until the server is gone.
  const std::vector<int32_t> p = prompt(0);
  int64_t id = 0;
  expect_error(dt_server_submit(s, p.data(), 3, nullptr, nullptr, nullptr, &id), DT_ERR_UNAVAILABLE, {"draining"});
  const std::string st = stats(s);
  EXPECT_NE(st.find("\"finished\":12"), std::string::npos) << st;
  EXPECT_NE(st.find("\"used_blocks\":0"), std::string::npos) << st;
  dt_server_destroy(s);
  dt_module_destroy(m);
}

TEST(ApiServer, HostThreadsGetGeneratesTokens) { serve_from_threads(nullptr); }

TEST(ApiServer, OnATensorParallelMesh) {
  Opts mo;
  mo.i("tp", 2);
  dt_mesh* mesh = nullptr;
  OK(dt_mesh_create("local", 2, mo.o, &mesh));
  serve_from_threads(mesh);
  dt_mesh_destroy(mesh);
}

TEST(ApiServer, CancelMetricsAndBadArguments) {
  dt_module* m = model();
  dt_server* s = nullptr;
  { Opts so; so.i("block_size", 0); expect_error(dt_server_create(nullptr, m, so.o, &s), DT_ERR_INVALID_ARGUMENT, {"block_size = 0", "[1, 1024]"}); }
  { Opts so; so.i("kv_blok", 3); expect_error(dt_server_create(nullptr, m, so.o, &s), DT_ERR_INVALID_ARGUMENT, {"kv_blok", "kv_blocks"}); }
  EXPECT_EQ(s, nullptr);
  OK(dt_server_create(nullptr, m, nullptr, &s));
  int64_t ctx = 0, vocab = 0;
  OK(dt_server_model_info(s, &ctx, &vocab));
  EXPECT_EQ(ctx, 48);
  EXPECT_EQ(vocab, kVocab);
  const std::vector<int32_t> p = {1, 2, 3};
  int64_t id = 0;
  { Opts o; o.i("max_tokens", 0); expect_error(dt_server_submit(s, p.data(), 3, o.o, nullptr, nullptr, &id), DT_ERR_INVALID_ARGUMENT, {"max_tokens = 0", "[1, context = 48]"}); }
  { Opts o; o.s("stop_tokens", "3,x"); expect_error(dt_server_submit(s, p.data(), 3, o.o, nullptr, nullptr, &id), DT_ERR_INVALID_ARGUMENT, {"stop_tokens"}); }
  const std::vector<int32_t> bad = {1, 99};
  expect_error(dt_server_submit(s, bad.data(), 2, nullptr, nullptr, nullptr, &id), DT_ERR_INVALID_ARGUMENT, {"token id 99", "vocab_size = 40"});
  expect_error(dt_server_submit(s, p.data(), 0, nullptr, nullptr, nullptr, &id), DT_ERR_INVALID_ARGUMENT, {"prompt_len = 0"});
  // Longer than the context: accepted, then rejected with the reason.
  { Opts o; o.i("max_tokens", 47);
    OK(dt_server_submit(s, p.data(), 3, o.o, nullptr, nullptr, &id));
    int32_t buf[1], state = 0, done = 0; int64_t n = 0;
    OK(dt_server_poll(s, id, buf, 1, &n, &state, &done, 5000));
    EXPECT_EQ(state, DT_REQUEST_REJECTED);
    EXPECT_EQ(done, 1); }
  // A long request cancelled: it ends at once as aborted, its blocks freed.
  { Opts o; o.i("max_tokens", 40);
    OK(dt_server_submit(s, p.data(), 3, o.o, nullptr, nullptr, &id));
    OK(dt_server_cancel(s, id));
    int32_t buf[64], state = 0, done = 0; int64_t n = 0;
    while (!done) OK(dt_server_poll(s, id, buf, 64, &n, &state, &done, 5000));
    EXPECT_EQ(state, DT_REQUEST_ABORTED);
    expect_error(dt_server_poll(s, id, buf, 64, &n, &state, &done, 0), DT_ERR_NOT_FOUND, {"unknown"});
    expect_error(dt_server_cancel(s, id), DT_ERR_NOT_FOUND, {"already ended"}); }
  size_t need = 0;
  OK(dt_server_metrics_text(s, nullptr, 0, &need));
  std::string text(need, '\0');
  OK(dt_server_metrics_text(s, text.data(), need, &need));
  for (const char* k : {"dtrain_requests_total{state=\"aborted\"} 1", "dtrain_requests_total{state=\"rejected\"} 1",
                        "dtrain_kv_blocks{state=\"used\"} 0", "dtrain_time_to_first_token_seconds_bucket"})
    EXPECT_NE(text.find(k), std::string::npos) << k << "\n" << text;
  dt_server_destroy(s);
  dt_server_destroy(nullptr);
  dt_module_destroy(m);
}

}  // namespace
