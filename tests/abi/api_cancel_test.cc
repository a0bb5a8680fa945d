// Cancellation and zero-copy memory through the C ABI: a dt_cancel raised from another
// thread ends a train step, an evaluation or a generation with DT_ERR_CANCELLED soon after,
// the engine goes on as if the call had not been made (same step, same weights, same
// answers), on one rank and on meshes of several; a v2 token callback stops a stream; a
// tensor shares its memory out (dt_tensor_data) and borrows the caller's
// (dt_tensor_create_from_memory), releasing the loan exactly once.
#include "abi_util.h"
#include "../sanitized.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

namespace DT_TEST_NS {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// The bound on how soon a cancelled call returns. Sanitized builds run the layers
// between two check points several times slower, so there the bound only catches a call
// that never noticed the flag.
// The "slow" models are smaller there too: their calls still span many check points.
#if DT_TEST_SANITIZED
constexpr double kReturnWithinMs = 1000.0;
constexpr int64_t kLayers = 3, kWidth = 64, kTokens = 64;
#else
constexpr double kReturnWithinMs = 100.0;
constexpr int64_t kLayers = 6, kWidth = 256, kTokens = 128;
#endif

struct Model {
  dt_module* m = nullptr;
  dt_optimizer* opt = nullptr;
  dt_engine* e = nullptr;
  // A model whose step takes a while (hundreds of ms here), so that a cancel lands inside it.
  Model(dt_mesh* mesh, int64_t layers, int64_t d_model, const char* engine_keys = nullptr, int64_t micro = 1) {
    Opts c;
    c.s("preset", "gpt-tiny").i("n_layer", layers).i("d_model", d_model).i("n_head", 4).i("context", 128).i("seed", 3);
    EXPECT_EQ(dt_module_create_gpt(c.o, &m), DT_OK) << dt_last_error_message();
    Opts oo;
    oo.d("lr", 1e-3);
    EXPECT_EQ(dt_optimizer_create(m, "adamw", oo.o, &opt), DT_OK) << dt_last_error_message();
    Opts eo;
    eo.i("micro_batches", micro);
    if (engine_keys) eo.i(engine_keys, 1);
    EXPECT_EQ(dt_engine_create(mesh, m, opt, eo.o, &e), DT_OK) << dt_last_error_message();
  }
  ~Model() {
    dt_engine_destroy(e);
    dt_optimizer_destroy(opt);
    dt_module_destroy(m);
  }
  int64_t step() {
    int64_t s = -1;
    EXPECT_EQ(dt_engine_step(e, &s), DT_OK);
    return s;
  }
};

struct Batch {
  dt_tensor *in = nullptr, *tg = nullptr;
  Batch(int64_t B, int64_t T) {
    const int64_t shape[2] = {B, T};
    std::vector<int32_t> a(static_cast<size_t>(B * T)), b(a.size());
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int32_t>(i * 7 % 250), b[i] = static_cast<int32_t>((i * 7 + 1) % 250);
    EXPECT_EQ(dt_tensor_create(DT_I32, shape, 2, "cpu", nullptr, &in), DT_OK);
    EXPECT_EQ(dt_tensor_create(DT_I32, shape, 2, "cpu", nullptr, &tg), DT_OK);
    EXPECT_EQ(dt_tensor_copy_from_host(in, a.data(), a.size() * 4), DT_OK);
    EXPECT_EQ(dt_tensor_copy_from_host(tg, b.data(), b.size() * 4), DT_OK);
  }
  ~Batch() {
    dt_tensor_destroy(in);
    dt_tensor_destroy(tg);
  }
};

struct Cancel {
  dt_cancel* c = nullptr;
  Cancel() { EXPECT_EQ(dt_cancel_create(&c), DT_OK); }
  ~Cancel() { dt_cancel_destroy(c); }
};

// How long `call` takes; it must succeed.
double timed_ms(const std::function<dt_status()>& call) {
  const auto t0 = Clock::now();
  EXPECT_EQ(call(), DT_OK) << dt_last_error_message();
  return ms_since(t0);
}

// Runs `call` while another thread raises `c` `delay_ms` into it: the call's status, and
// how long after the cancel it returned.
struct Cancelled {
  dt_status status;
  double after_ms;
};
Cancelled cancel_after(dt_cancel* c, double delay_ms, const std::function<dt_status()>& call) {
  Clock::time_point raised_at{};
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms));
    raised_at = Clock::now();
    dt_cancel_request(c);
  });
  const dt_status status = call();
  late.join();
  return {status, ms_since(raised_at)};
}

// A local mesh of two ranks over `axis`, or none for "" (the engine then runs alone).
struct TwoRanks {
  dt_mesh* m = nullptr;
  explicit TwoRanks(const char* axis) {
    if (!*axis) return;
    Opts mo;
    mo.i(axis, 2);
    EXPECT_EQ(dt_mesh_create("local", 2, mo.o, &m), DT_OK) << dt_last_error_message();
  }
  ~TwoRanks() { dt_mesh_destroy(m); }
  TwoRanks(const TwoRanks&) = delete;
  TwoRanks& operator=(const TwoRanks&) = delete;
};

std::vector<float> param0(dt_module* m) {
  const char* name = nullptr;
  EXPECT_EQ(dt_module_param_name(m, 0, &name), DT_OK);
  dt_tensor* p = nullptr;
  EXPECT_EQ(dt_module_param(m, name, &p), DT_OK) << dt_last_error_message();
  size_t bytes = 0;
  EXPECT_EQ(dt_tensor_nbytes(p, &bytes), DT_OK);
  std::vector<float> v(bytes / 4);
  EXPECT_EQ(dt_tensor_copy_to_host(p, v.data(), bytes), DT_OK);
  dt_tensor_destroy(p);
  return v;
}


TEST(Cancel, FlagBasicsAndBadArguments) {
  Cancel c;
  int32_t raised = -1;
  OK(dt_cancel_is_requested(c.c, &raised));
  EXPECT_EQ(raised, 0);
  OK(dt_cancel_request(c.c));
  OK(dt_cancel_request(c.c));  // idempotent
  OK(dt_cancel_is_requested(c.c, &raised));
  EXPECT_EQ(raised, 1);
  OK(dt_cancel_reset(c.c));
  OK(dt_cancel_is_requested(c.c, &raised));
  EXPECT_EQ(raised, 0);
  expect_error(dt_cancel_request(nullptr), DT_ERR_INVALID_ARGUMENT, {"cancel"});
  expect_error(dt_cancel_create(nullptr), DT_ERR_INVALID_ARGUMENT, {"out"});
  expect_error(dt_engine_set_cancel(nullptr, c.c), DT_ERR_INVALID_ARGUMENT, {"engine"});
  EXPECT_STREQ(dt_status_string(DT_ERR_CANCELLED), "DT_ERR_CANCELLED");
  dt_cancel_destroy(nullptr);
}

// The bound: the call returns within 100 ms of the cancel, changes nothing, and the
// next call works. One rank: the engine checks before every layer.
TEST(Cancel, TrainStepStopsMidStepAndChangesNothing) {
  Model md(nullptr, kLayers, kWidth, nullptr, 4);
  Batch b(16, kTokens);
  Cancel c;
  OK(dt_engine_set_cancel(md.e, c.c));
  double loss = 0;
  auto step_call = [&] { return dt_engine_train_step(md.e, b.in, b.tg, &loss); };
  OK(step_call());  // the flag is down: plain steps (the first is the slow one)
  const double step_ms = timed_ms(step_call);
  const std::vector<float> before = param0(md.m);
  const int64_t step = md.step();
  const Cancelled r = cancel_after(c.c, step_ms / 3, step_call);
  expect_error(r.status, DT_ERR_CANCELLED, {"dt_engine_train_step", "train_step cancelled"});
  std::printf("step %.0f ms; returned %.1f ms after the cancel\n", step_ms, r.after_ms);
  EXPECT_LT(r.after_ms, kReturnWithinMs);
  EXPECT_EQ(md.step(), step);
  EXPECT_EQ(param0(md.m), before);
  // Raised before the call: fails at once. Lowered: the next step trains.
  expect_error(dt_engine_eval(md.e, b.in, b.tg, &loss), DT_ERR_CANCELLED, {"evaluate cancelled"});
  OK(dt_cancel_reset(c.c));
  OK(dt_engine_train_step(md.e, b.in, b.tg, &loss));
  EXPECT_EQ(md.step(), step + 1);
  OK(dt_engine_set_cancel(md.e, nullptr));
  OK(dt_cancel_request(c.c));  // detached: no effect
  OK(dt_engine_train_step(md.e, b.in, b.tg, &loss));
}

// A cancelled step leaves exactly the state an uncancelled engine has: the next steps give
// bitwise the same losses as an engine that was never cancelled.
TEST(Cancel, CancelledStepLeavesNoTrace) {
  Model a(nullptr, 2, 64), ref(nullptr, 2, 64);
  Batch b(4, 32);
  Cancel c;
  OK(dt_engine_set_cancel(a.e, c.c));
  OK(dt_cancel_request(c.c));
  double la = 0, lr = 0;
  expect_error(dt_engine_train_step(a.e, b.in, b.tg, &la), DT_ERR_CANCELLED, {"train_step"});
  OK(dt_cancel_reset(c.c));
  for (int i = 0; i < 3; ++i) {
    OK(dt_engine_train_step(a.e, b.in, b.tg, &la));
    OK(dt_engine_train_step(ref.e, b.in, b.tg, &lr));
    EXPECT_EQ(la, lr) << "step " << i;
  }
}

TEST(Cancel, EvalStopsMidCall) {
  Model md(nullptr, kLayers, kWidth, nullptr, 8);
  Batch b(32, kTokens);
  Cancel c;
  OK(dt_engine_set_cancel(md.e, c.c));
  double loss = 0;
  auto eval_call = [&] { return dt_engine_eval(md.e, b.in, b.tg, &loss); };
  const Cancelled r = cancel_after(c.c, timed_ms(eval_call) / 3, eval_call);
  expect_error(r.status, DT_ERR_CANCELLED, {"evaluate cancelled"});
  EXPECT_LT(r.after_ms, kReturnWithinMs);
}

// Several ranks: they agree to stop where the gradients are complete (one all-reduce), so
// none updates, the mesh stays healthy, and the next step starts from the same weights:
// its loss (taken before its update) is the loss an evaluation saw before the cancel.
TEST(Cancel, RanksOfEveryLayoutAgreeAndTheMeshStaysUsable) {
  struct Layout {
    const char* axis;
    const char* engine_key;
  };
  for (const Layout& l : {Layout{"dp", nullptr}, Layout{"dp", "zero"}, Layout{"tp", nullptr}, Layout{"pp", nullptr}}) {
    SCOPED_TRACE(std::string(l.axis) + (l.engine_key ? " zero" : ""));
    TwoRanks mesh(l.axis);
    Model md(mesh.m, kLayers, kWidth, l.engine_key, 2);
    Batch b(8, kTokens);
    Cancel c;
    OK(dt_engine_set_cancel(md.e, c.c));
    double loss = 0, eval_before = 0;
    auto step_call = [&] { return dt_engine_train_step(md.e, b.in, b.tg, &loss); };
    OK(step_call());  // the first step is the slow one
    const double step_ms = timed_ms(step_call);
    OK(dt_engine_eval(md.e, b.in, b.tg, &eval_before));
    const Cancelled r = cancel_after(c.c, step_ms / 3, step_call);
    expect_error(r.status, DT_ERR_CANCELLED, {"train_step cancelled"});
    std::printf("%s%s: step %.0f ms, returned %.0f ms after the cancel\n", l.axis, l.engine_key ? "+zero" : "",
                step_ms, r.after_ms);
    EXPECT_EQ(md.step(), 2);
    // Raised before: refused at once. Lowered: the mesh and the engine go on, unchanged.
    expect_error(step_call(), DT_ERR_CANCELLED, {"train_step cancelled"});
    OK(dt_cancel_reset(c.c));
    OK(step_call());
    EXPECT_EQ(md.step(), 3);
    EXPECT_NEAR(loss, eval_before, 1e-5 * std::abs(eval_before));
    OK(dt_mesh_barrier(mesh.m, l.axis));
  }
}

struct Seen {
  std::vector<int32_t> tokens;
  int stop_after = 0;
};
int32_t stop_after_n(void* user, int32_t, int32_t token) {
  auto* s = static_cast<Seen*>(user);
  s->tokens.push_back(token);
  return static_cast<int>(s->tokens.size()) >= s->stop_after ? 1 : 0;
}

TEST(Cancel, StreamCallbackStopsGeneration) {
  // One rank, tp replicas (agreeing before each step), a pipeline (its last stage decides).
  for (const char* axis : {"", "tp", "pp"}) {
    SCOPED_TRACE(axis);
    TwoRanks mesh(axis);
    Model md(mesh.m, 2, 64);
    const int32_t prompt[3] = {1, 2, 3};
    const int64_t len = 3;
    Opts g;
    g.i("max_new_tokens", 40);
    std::vector<int32_t> out(40, -7);
    int64_t out_len = -1;
    int64_t cur0 = 0, cur1 = 0;
    OK(dt_memory_stats("cpu", DT_MEM_ALL, &cur0, nullptr));
    Seen seen;
    seen.stop_after = 3;
    expect_error(dt_engine_generate_stream_v2(md.e, prompt, &len, 1, g.o, stop_after_n, &seen, out.data(), 40, &out_len),
                 DT_ERR_CANCELLED, {"generate cancelled", "callback asked to stop"});
    EXPECT_EQ(seen.tokens.size(), 3u);  // never called after it said stop
    EXPECT_EQ(out_len, -1);  // nothing written
    OK(dt_memory_stats("cpu", DT_MEM_ALL, &cur1, nullptr));
    EXPECT_EQ(cur1, cur0);  // the KV cache and buffers are gone
    // The next call works and starts with the same tokens.
    Seen all;
    all.stop_after = 1000;
    OK(dt_engine_generate_stream_v2(md.e, prompt, &len, 1, g.o, stop_after_n, &all, out.data(), 40, &out_len));
    EXPECT_EQ(out_len, 40);
    EXPECT_EQ(std::vector<int32_t>(all.tokens.begin(), all.tokens.begin() + 3), seen.tokens);
    // A raised flag stops it too.
    Cancel c;
    OK(dt_engine_set_cancel(md.e, c.c));
    OK(dt_cancel_request(c.c));
    expect_error(dt_engine_generate(md.e, prompt, &len, 1, g.o, out.data(), 40, &out_len), DT_ERR_CANCELLED,
                 {"generate cancelled"});
  }
}

TEST(Cancel, GenerateStopsWithinADecodeStep) {
  // One rank, and a pipeline of two stages (the last stage decides; the rest drains).
  for (const char* axis : {"", "pp"}) {
    SCOPED_TRACE(axis);
    TwoRanks mesh(axis);
    Model md(mesh.m, kLayers, kWidth);
    const int32_t prompt[3] = {1, 2, 3};
    const int64_t len = 3;
    Opts g;
    g.i("max_new_tokens", 120);
    std::vector<int32_t> out(120);
    int64_t out_len = 0;
    Cancel c;
    OK(dt_engine_set_cancel(md.e, c.c));
    auto generate_call = [&] { return dt_engine_generate(md.e, prompt, &len, 1, g.o, out.data(), 120, &out_len); };
    // Warm: a pipeline's first generation also sets up its stages' streams (a third of the
    // first call's time could be all of a warm one's, and the cancel would come too late).
    const double gen_ms = std::min(timed_ms(generate_call), timed_ms(generate_call));
    // A shared machine can run this call faster than the timed ones (it then ends before the
    // cancel comes, OK): cancel earlier, up to twice, before calling it a failure.
    Cancelled r{DT_OK, 0};
    for (double part : {3.0, 8.0, 20.0}) {
      OK(dt_cancel_reset(c.c));
      r = cancel_after(c.c, gen_ms / part, generate_call);
      if (r.status != DT_OK) break;
    }
    expect_error(r.status, DT_ERR_CANCELLED, {"generate cancelled"});
    std::printf("%s: generate %.0f ms, returned %.1f ms after the cancel\n", *axis ? axis : "one rank", gen_ms,
                r.after_ms);
    EXPECT_LT(r.after_ms, kReturnWithinMs);
    // The engine generates again, in full.
    OK(dt_cancel_reset(c.c));
    OK(generate_call());
    EXPECT_EQ(out_len, 120);
  }
}

void count_release(void* user) { ++*static_cast<int*>(user); }

TEST(ZeroCopy, DataAddressIsTheTensorsMemory) {
  const int64_t shape[2] = {3, 4};
  dt_tensor* t = nullptr;
  OK(dt_tensor_create(DT_F32, shape, 2, "cpu", nullptr, &t));
  void* p = nullptr;
  OK(dt_tensor_data(t, &p));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4, 0u);
  static_cast<float*>(p)[5] = 2.5f;  // a write through the address is the tensor's
  float back[12];
  OK(dt_tensor_copy_to_host(t, back, sizeof back));
  EXPECT_EQ(back[5], 2.5f);
  expect_error(dt_tensor_data(nullptr, &p), DT_ERR_INVALID_ARGUMENT, {"tensor"});
  expect_error(dt_tensor_data(t, nullptr), DT_ERR_INVALID_ARGUMENT, {"out"});
  dt_tensor_destroy(t);
}

TEST(ZeroCopy, BorrowedMemoryIsSharedAndReleasedOnce) {
  std::vector<float> mine(12, 1.0f);
  int released = 0;
  const int64_t shape[2] = {3, 4};
  int64_t cur0 = 0, cur1 = 0;
  OK(dt_memory_stats("cpu", DT_MEM_ALL, &cur0, nullptr));
  dt_tensor* t = nullptr;
  OK(dt_tensor_create_from_memory(DT_F32, shape, 2, "cpu", mine.data(), count_release, &released, &t));
  OK(dt_memory_stats("cpu", DT_MEM_ALL, &cur1, nullptr));
  EXPECT_EQ(cur1, cur0);  // not libdtrain's bytes
  void* p = nullptr;
  OK(dt_tensor_data(t, &p));
  EXPECT_EQ(p, mine.data());
  mine[7] = 9.0f;  // both ways
  float back[12];
  OK(dt_tensor_copy_to_host(t, back, sizeof back));
  EXPECT_EQ(back[7], 9.0f);
  const float in[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  OK(dt_tensor_copy_from_host(t, in, sizeof in));
  EXPECT_EQ(mine[11], 11.0f);
  // An op writes into it too.
  dt_tensor* y = nullptr;
  OK(dt_tensor_create(DT_F32, shape, 2, "cpu", nullptr, &y));
  OK(dt_softmax(t, y));
  EXPECT_EQ(released, 0);
  dt_tensor_destroy(t);
  EXPECT_EQ(released, 1);
  dt_tensor_destroy(y);
  EXPECT_EQ(released, 1);
}

// A batch lent to a train step or an evaluation is the engine's only during the call: the
// release callback fires at the batch's dt_tensor_destroy, not at the engine's next step or
// destroy (the engine's pool of activations kept the last batch's ids and targets).
TEST(ZeroCopy, LentBatchIsReleasedAtItsDestroyNotLater) {
  for (const char* axis : {"", "dp", "pp"}) {
    SCOPED_TRACE(*axis ? axis : "one rank");
    TwoRanks mesh(axis);
    Model model(mesh.m, 2, 32, nullptr, 2);
    const int64_t B = 4, T = 16, shape[2] = {B, T};
    std::vector<int32_t> in(static_cast<size_t>(B * T)), tg(in.size());
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(i % 50), tg[i] = static_cast<int32_t>((i + 1) % 50);
    for (bool train : {true, false}) {
      int released = 0;
      dt_tensor *ti = nullptr, *tt = nullptr;
      OK(dt_tensor_create_from_memory(DT_I32, shape, 2, "cpu", in.data(), count_release, &released, &ti));
      OK(dt_tensor_create_from_memory(DT_I32, shape, 2, "cpu", tg.data(), count_release, &released, &tt));
      double loss = 0;
      OK(train ? dt_engine_train_step(model.e, ti, tt, &loss) : dt_engine_eval(model.e, ti, tt, &loss));
      EXPECT_EQ(released, 0);
      dt_tensor_destroy(ti);
      dt_tensor_destroy(tt);
      EXPECT_EQ(released, 2) << (train ? "train step" : "eval") << ": the engine still holds the lent batch";
    }
  }
}

TEST(ZeroCopy, RefusedLoansAreReleasedAndNamed) {
  alignas(8) char buf[64] = {};
  int released = 0;
  const int64_t shape[1] = {4};
  const int64_t bad_shape[1] = {0};
  dt_tensor* t = nullptr;
  expect_error(dt_tensor_create_from_memory(DT_F32, shape, 1, "cpu", buf + 1, count_release, &released, &t),
               DT_ERR_INVALID_ARGUMENT, {"aligned", "f32"});
  EXPECT_EQ(released, 1);
  expect_error(dt_tensor_create_from_memory(DT_F32, bad_shape, 1, "cpu", buf, count_release, &released, &t),
               DT_ERR_INVALID_ARGUMENT, {"shape"});
  EXPECT_EQ(released, 2);
  expect_error(dt_tensor_create_from_memory(99, shape, 1, "cpu", buf, count_release, &released, &t),
               DT_ERR_INVALID_ARGUMENT, {"dtype"});
  EXPECT_EQ(released, 3);
  expect_error(dt_tensor_create_from_memory(DT_F32, shape, 1, "cpu", nullptr, count_release, &released, &t),
               DT_ERR_INVALID_ARGUMENT, {"data"});
  EXPECT_EQ(released, 4);
  expect_error(dt_tensor_create_from_memory(DT_F32, shape, 1, "tpu", buf, count_release, &released, &t),
               DT_ERR_INVALID_ARGUMENT, {"device"});
  EXPECT_EQ(released, 5);
  EXPECT_EQ(t, nullptr);
  // No release callback is fine.
  OK(dt_tensor_create_from_memory(DT_I32, shape, 1, "cpu", buf, nullptr, nullptr, &t));
  dt_tensor_destroy(t);
}

}  // namespace
