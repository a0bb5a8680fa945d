// dt_server's OpenAI sampling keys through the C API: bad values of each key are refused
// naming it and what is accepted; dt_server_poll_logprobs gives each token's
// log-probability and fixed-size rows of alternatives (padded with -1 / -inf); a callback
// reads the same values with dt_server_event_logprobs; dt_server_poll still reads such a
// request; a request without "logprobs" is refused by dt_server_poll_logprobs with nothing
// taken.
#include <cmath>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "dtrain/dtrain.h"
#include "unit/test_util.h"

namespace DT_TEST_NS {

#define OK(call) ASSERT_EQ((call), DT_OK) << dt_last_error_message()

constexpr int64_t kVocab = 40;

struct Opts {
  dt_options* o = nullptr;
  Opts() { dt_options_create(&o); }
  ~Opts() { dt_options_destroy(o); }
  Opts& i(const char* k, int64_t v) { return dt_options_set_int(o, k, v), *this; }
  Opts& d(const char* k, double v) { return dt_options_set_double(o, k, v), *this; }
  Opts& s(const char* k, const char* v) { return dt_options_set_string(o, k, v), *this; }
};

class ServeApiLogprobs : public ::testing::Test {
 protected:
  void SetUp() override {
    Opts c;
    c.s("preset", "gpt-tiny").i("vocab_size", kVocab).i("context", 48).i("seed", 3);
    OK(dt_module_create_gpt(c.o, &m_));
    Opts so;
    so.i("block_size", 4).i("kv_blocks", 32);
    OK(dt_server_create(nullptr, m_, so.o, &s_));
  }
  void TearDown() override {
    dt_server_destroy(s_);
    dt_module_destroy(m_);
  }
  int64_t submit(const Opts& o, dt_request_callback cb = nullptr, void* user = nullptr) {
    int64_t id = -1;
    EXPECT_EQ(dt_server_submit(s_, prompt_.data(), static_cast<int64_t>(prompt_.size()), o.o, cb, user, &id), DT_OK)
        << dt_last_error_message();
    return id;
  }
  dt_module* m_ = nullptr;
  dt_server* s_ = nullptr;
  std::vector<int32_t> prompt_ = {4, 9, 1, 33, 2};
};

TEST_F(ServeApiLogprobs, BadValuesNameTheKeyAndTheRange) {
  struct Bad {
    std::function<void(Opts&)> set;
    std::string needle;
  };
  const std::vector<Bad> bad = {
      {[](Opts& o) { o.d("presence_penalty", 2.5); }, "presence_penalty = 2.5"},
      {[](Opts& o) { o.d("frequency_penalty", -3); }, "frequency_penalty = -3"},
      {[](Opts& o) { o.d("repetition_penalty", 0); }, "repetition_penalty = 0"},
      {[](Opts& o) { o.d("repetition_penalty", 1e300); }, "accepted: (0, 2]"},
      {[](Opts& o) { o.s("logit_bias", "5:200"); }, "logit_bias: bias 200"},
      {[](Opts& o) { o.s("logit_bias", "5"); }, "option \"logit_bias\" = \"5\": bad entry"},
      {[](Opts& o) { o.s("logit_bias", "x:1"); }, "accepted: \"id:bias\" pairs"},
      {[](Opts& o) { o.s("logit_bias", "-1:1"); }, "bad entry \"-1:1\""},
      {[](Opts& o) { o.s("logit_bias", "3:nan"); }, "bad entry \"3:nan\""},
      {[](Opts& o) { o.s("logit_bias", "40:1"); }, "token id 40 is outside [0, vocab_size = 40)"},
      {[](Opts& o) { o.s("logit_bias", "3:1, 3:2"); }, "token id 3 appears twice"},
      {[](Opts& o) { o.i("logprobs", 21); }, "logprobs\" = 21; accepted: [0, 20]"},
      {[](Opts& o) { o.i("logprobs", int64_t{1} << 32); }, "logprobs\" = 4294967296"},
      {[](Opts& o) { o.d("logprobs", 2.0); }, "logprobs"},
  };
  for (const Bad& b : bad) {
    Opts o;
    b.set(o);
    int64_t id = -1;
    EXPECT_EQ(dt_server_submit(s_, prompt_.data(), 5, o.o, nullptr, nullptr, &id), DT_ERR_INVALID_ARGUMENT)
        << b.needle;
    EXPECT_NE(std::string(dt_last_error_message()).find(b.needle), std::string::npos)
        << "\"" << b.needle << "\" not in: " << dt_last_error_message();
  }
  std::string many;
  for (int i = 0; i < 302; ++i) many += std::to_string(i % kVocab) + ":1,";
  Opts o;
  o.s("logit_bias", many.c_str());
  int64_t id = -1;
  EXPECT_EQ(dt_server_submit(s_, prompt_.data(), 5, o.o, nullptr, nullptr, &id), DT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dt_last_error_message()).find("at most 300"), std::string::npos) << dt_last_error_message();
  // In range: accepted (whitespace around entries allowed).
  Opts fine;
  fine.d("presence_penalty", -2).d("frequency_penalty", 2).d("repetition_penalty", 2).i("logprobs", 20);
  fine.s("logit_bias", " 0:-100, 39:100 ,7:0.5");
  submit(fine);
  OK(dt_server_drain(s_, 60000));
}

struct Seen {
  std::mutex mu;
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<int32_t>> top;
  int32_t no_logprobs_status = DT_OK;  // of dt_server_event_logprobs at the end without a token
  dt_server* server = nullptr;
};

void on_event(void* user, int64_t, int32_t token, int32_t done, int32_t, const char*) {
  auto& s = *static_cast<Seen*>(user);
  std::lock_guard<std::mutex> lk(s.mu);
  float lp = 0;
  int32_t ids[8], n = -1;
  float vals[8];
  const dt_status st = dt_server_event_logprobs(s.server, &lp, ids, vals, 8, &n);
  if (token < 0) {
    s.no_logprobs_status = st;
    return;
  }
  if (st != DT_OK) return;
  s.tokens.push_back(token);
  s.logprobs.push_back(lp);
  s.top.emplace_back(ids, ids + n);
  (void)done;
}

TEST_F(ServeApiLogprobs, PollAndCallbackGiveTheLogprobs) {
  Opts o;
  o.i("max_tokens", 6).i("logprobs", 3).d("frequency_penalty", 0.5);
  const int64_t polled = submit(o);
  Seen seen;
  seen.server = s_;
  const int64_t called = submit(o, on_event, &seen);
  (void)called;
  Opts plain;
  plain.i("max_tokens", 6);
  const int64_t without = submit(plain);

  // Rows of 4 for k = 3: the last column is padding.
  std::vector<int32_t> tokens;
  std::vector<float> lps;
  std::vector<int32_t> top_ids;
  std::vector<float> top_lps;
  for (int32_t done = 0; !done;) {
    int32_t t[2], ids[8], state = -1;
    float lp[2], tl[8];
    int64_t n = 0;
    OK(dt_server_poll_logprobs(s_, polled, t, lp, ids, tl, 4, 2, &n, &state, &done, 1000));
    for (int64_t i = 0; i < n; ++i) {
      tokens.push_back(t[i]);
      lps.push_back(lp[i]);
      top_ids.insert(top_ids.end(), ids + 4 * i, ids + 4 * i + 4);
      top_lps.insert(top_lps.end(), tl + 4 * i, tl + 4 * i + 4);
    }
  }
  ASSERT_EQ(tokens.size(), 6u);
  for (size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_LE(lps[i], 0.0f);
    EXPECT_EQ(top_ids[4 * i + 3], -1);
    EXPECT_TRUE(std::isinf(top_lps[4 * i + 3]) && top_lps[4 * i + 3] < 0);
    EXPECT_GE(top_lps[4 * i], top_lps[4 * i + 1]);
    EXPECT_GE(top_lps[4 * i + 1], top_lps[4 * i + 2]);
    EXPECT_GE(top_lps[4 * i], lps[i]);  // nothing is more likely than the most likely
  }
  {  // without a callback there is no current event
    float lp;
    int32_t n;
    EXPECT_EQ(dt_server_event_logprobs(s_, &lp, nullptr, nullptr, 0, &n), DT_ERR_INVALID_ARGUMENT);
  }
  // A request without "logprobs": refused, nothing taken; dt_server_poll then takes it all.
  float lp[8];
  int32_t t[8], state = -1, done = 0;
  int64_t n = 0;
  EXPECT_EQ(dt_server_poll_logprobs(s_, without, t, lp, nullptr, nullptr, 0, 8, &n, &state, &done, 0),
            DT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dt_last_error_message()).find("without \"logprobs\""), std::string::npos);
  OK(dt_server_drain(s_, 60000));
  OK(dt_server_poll(s_, without, t, 8, &n, &state, &done, 0));
  EXPECT_EQ(n, 6);
  EXPECT_EQ(done, 1);

  std::lock_guard<std::mutex> lk(seen.mu);
  EXPECT_EQ(seen.tokens, tokens) << "the same request alone or beside others: the same tokens";
  ASSERT_EQ(seen.logprobs.size(), lps.size());
  for (size_t i = 0; i < lps.size(); ++i) {
    EXPECT_NEAR(seen.logprobs[i], lps[i], 1e-4);
    EXPECT_EQ(seen.top[i], std::vector<int32_t>(top_ids.begin() + 4 * i, top_ids.begin() + 4 * i + 3));
  }
}

TEST_F(ServeApiLogprobs, PollReadsALogprobsRequest) {
  Opts o;
  o.i("max_tokens", 5).i("logprobs", 0);
  const int64_t id = submit(o);
  OK(dt_server_drain(s_, 60000));
  int32_t t[8], state = -1, done = 0;
  float lp[8];
  int64_t n = 0;
  OK(dt_server_poll_logprobs(s_, id, t, lp, nullptr, nullptr, 0, 2, &n, &state, &done, 0));  // k = 0: no rows
  EXPECT_EQ(n, 2);
  OK(dt_server_poll(s_, id, t, 8, &n, &state, &done, 0));
  EXPECT_EQ(n, 3);
  EXPECT_EQ(done, 1);
  EXPECT_EQ(state, DT_REQUEST_FINISHED);
}

}  // namespace
