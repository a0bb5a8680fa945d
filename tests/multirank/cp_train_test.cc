// Context parallelism (ring attention on the cp axis, nn/ring_attention.h and
// parallel/cp_strategy.h). RingAttention: the ring on the local backend against single-rank
// causal attention over the whole sequence, cp 2, 3 and 4, grouped-query heads, f32 and bf16:
// each rank's output rows, log-sum-exps and dQ, dK, dV rows must be those of the whole
// sequence's at its positions (f32: 2e-5; bf16 inputs, computed in f32 on both sides: 2e-2);
// the zig-zag positions. CpTrain: trained on the local backend's layouts against one rank on
// the same global batches (DESIGN §4): cp 2 and 4; cp 2 x dp 2; cp 2 with ZeRO-1 and -2 over
// dp x cp; cp 2 x tp 2, with and without sequence parallelism; cp 2 x pp 2. Llama-style
// (RoPE, GQA, an ignored target) and GPT-2 style (learned positions); generation after cp
// training. 10 AdamW steps with clipping and a warmup-cosine schedule; f32 within 2e-5 relative (loss per step, gradient norms, final parameters). Also: a sequence
// that does not split into 2 cp chunks, and cp with experts, are refused by name.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "engine/generate.h"
#include "multirank/coll_util.h"
#include "multirank/dp_test_util.h"
#include "kernels/ops.h"
#include "nn/ring_attention.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

constexpr int kSteps = 10;
using test::kSanitized;

nn::GPTConfig llama() {
  nn::GPTConfig c = test::tp_tiny_gpt(/*llama=*/true, DType::F32);
  c.context = 32;
  return c;
}

test::TokenBatch batch(int s) {
  test::TokenBatch b = test::random_token_batch(4, 16, 32, 700 + s % 3);
  b.tg.data<int32_t>()[21] = -1;  // an ignored target (in a middle chunk of row 1)
  return b;
}

test::TrainRun train(std::shared_ptr<comm::Mesh> mesh, const nn::GPTConfig& c, int64_t micro,
                     const engine::ParallelOptions& par = {}) {
  return test::train_layout(std::move(mesh), c, test::dp_options(micro), par, kSteps, batch);
}

std::shared_ptr<comm::Mesh> mesh(int dp, int pp, int cp, int tp = 1) { return comm::test::axes_mesh({dp, pp, 1, cp, tp}); }

TEST(CpTrain, ContextParallelMatchesSingleRankTraining) {
  for (bool rope : {true, false}) {
    if (kSanitized && !rope) continue;
    const nn::GPTConfig c = rope ? llama() : test::dp_tiny_gpt(DType::F32);
    const std::string what = rope ? "llama" : "gpt2";
    const test::TrainRun ref = train(nullptr, c, 2);
    test::expect_run_close(train(mesh(1, 1, 2), c, 2), ref, 2e-5, 2e-5, what + ", cp 2");
    if (kSanitized) continue;
    test::expect_run_close(train(mesh(1, 1, 4), c, 2), ref, 2e-5, 2e-5, what + ", cp 4");
    test::expect_run_close(train(mesh(2, 1, 2), c, 1), ref, 2e-5, 2e-5, what + ", dp 2 x cp 2");
  }
}

TEST(CpTrain, ComposesWithZeroTensorAndPipelineParallelism) {
  const nn::GPTConfig c = llama();
  const test::TrainRun ref = train(nullptr, c, 2);
  for (int zero : {1, 2}) {
    if (kSanitized && zero == 1) continue;
    engine::ParallelOptions p;
    p.zero = zero;
    test::expect_run_close(train(mesh(1, 1, 2), c, 2, p), ref, 2e-5, 2e-5, "cp 2, zero " + std::to_string(zero));
  }
  if (kSanitized) return;
  test::expect_run_close(train(mesh(1, 1, 2, 2), c, 2), ref, 2e-5, 2e-5, "cp 2 x tp 2");
  engine::ParallelOptions sp;
  sp.sequence_parallel = true;
  test::expect_run_close(train(mesh(1, 1, 2, 2), c, 2, sp), ref, 2e-5, 2e-5, "cp 2 x tp 2 with SP");
  test::expect_run_close(train(mesh(1, 2, 2), c, 2), ref, 2e-5, 2e-5, "cp 2 x pp 2");
}

TEST(CpTrain, GeneratesWithTheTrainedWeights) {
  nn::GPT model(llama());
  optim::AdamW opt(model.parameters(), test::dp_adamw());
  engine::Trainer t(mesh(1, 1, 2), model, opt, test::dp_options(1));
  for (int s = 0; s < 2; ++s) t.train_step(batch(s).in, batch(s).tg);
  engine::GenerateOptions g;
  g.max_new_tokens = 4;
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}, {4, 5}};
  const engine::GenerateResult got = t.generate(prompts, g);
  t.gather_model();
  EXPECT_EQ(got.tokens, engine::generate(model, prompts, g).tokens);
}

TEST(CpTrain, RefusalsNameTheOption) {
  const nn::GPTConfig c = llama();
  {
    nn::GPT model(c);
    optim::AdamW opt(model.parameters(), test::dp_adamw());
    engine::Trainer t(mesh(1, 1, 4), model, opt, test::dp_options(1));
    const test::TokenBatch b = test::random_token_batch(2, 12, 32, 1);
    test::expect_invalid([&] { t.train_step(b.in, b.tg); }, "does not split into 2 x cp = 8 equal chunks");
  }
  nn::GPTConfig moe = c;
  moe.n_experts = 4;
  moe.d_ff = 48;
  nn::GPT model(moe);
  optim::AdamW opt(model.parameters(), test::dp_adamw());
  test::expect_invalid([&] { engine::Trainer t(mesh(1, 1, 2), model, opt, test::dp_options(1)); },
                       "context parallelism (cp = 2) with a mixture of experts");
}


struct Whole {
  Tensor q, k, v, dout, out, lse, dq, dk, dv;
};

Whole whole(int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t D, DType t) {
  Whole w{test::randn({B, T, Hq, D}, t, 3, "q"),     test::randn({B, T, Hkv, D}, t, 3, "k"),
          test::randn({B, T, Hkv, D}, t, 3, "v"),    test::randn({B, T, Hq, D}, t, 3, "dout"),
          Tensor::zeros({B, T, Hq, D}, t),           Tensor::zeros({B, Hq, T}, DType::F32),
          Tensor::zeros({B, T, Hq, D}, t),           Tensor::zeros({B, T, Hkv, D}, t),
          Tensor::zeros({B, T, Hkv, D}, t)};
  kernels::attention_forward(w.q, w.k, w.v, 0.0f, w.out, w.lse);
  kernels::attention_backward(w.q, w.k, w.v, w.out, w.lse, w.dout, 0.0f, w.dq, w.dk, w.dv);
  return w;
}

// The rows `cols` (global positions) of x [B, T, ...], as f64.
std::vector<double> rows(const Tensor& x, const std::vector<int64_t>& cols) {
  const std::vector<double> all = test::to_f64(x);
  const int64_t B = x.dim(0), T = x.dim(1), W = x.numel() / (B * T);
  std::vector<double> out;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t : cols)
      for (int64_t e = 0; e < W; ++e) out.push_back(all[static_cast<size_t>((b * T + t) * W + e)]);
  return out;
}
Tensor take(const Tensor& x, const std::vector<int64_t>& cols) {
  Shape s = x.shape();
  s[1] = static_cast<int64_t>(cols.size());
  Tensor out = Tensor::zeros(s, x.dtype());
  const int64_t B = x.dim(0), T = x.dim(1), W = x.numel() / (B * T) * static_cast<int64_t>(dtype_size(x.dtype()));
  for (int64_t b = 0; b < B; ++b)
    for (size_t i = 0; i < cols.size(); ++i)
      std::memcpy(static_cast<char*>(out.raw()) + (b * s[1] + static_cast<int64_t>(i)) * W,
                  static_cast<const char*>(x.raw()) + (b * T + cols[i]) * W, static_cast<size_t>(W));
  return out;
}
// lse [B, H, T] at `cols`.
std::vector<double> lse_at(const Tensor& lse, const std::vector<int64_t>& cols) {
  const std::vector<double> all = test::to_f64(lse);
  const int64_t BH = lse.dim(0) * lse.dim(1), T = lse.dim(2);
  std::vector<double> out;
  for (int64_t r = 0; r < BH; ++r)
    for (int64_t t : cols) out.push_back(all[static_cast<size_t>(r * T + t)]);
  return out;
}

void check_ring(int cp, int64_t Hq, int64_t Hkv, DType t, double tol) {
  const int64_t B = 2, T = 16 * cp, D = 8;
  const Whole w = whole(B, T, Hq, Hkv, D, t);
  auto mesh = comm::test::axes_mesh({1, 1, 1, cp, 1});
  mesh->run([&](int, int rank) {
    nn::CpGroup g{&mesh->comm(rank, "cp")};
    const std::vector<int64_t> cols = g.columns(T);
    Tensor q = take(w.q, cols), k = take(w.k, cols), v = take(w.v, cols), dout = take(w.dout, cols);
    const int64_t Tl = T / cp;
    Tensor out = Tensor::zeros({B, Tl, Hq, D}, t), lse = Tensor::zeros({B, Hq, Tl}, DType::F32);
    nn::ring_attention_forward(g, q, k, v, out, lse);
    Tensor dq = Tensor::zeros(q.shape(), t), dk = Tensor::zeros(k.shape(), t), dv = Tensor::zeros(k.shape(), t);
    nn::ring_attention_backward(g, q, k, v, out, lse, dout, dq, dk, dv);
    const std::string what = "cp " + std::to_string(cp) + " rank " + std::to_string(rank) + " " + dtype_name(t) +
                             " Hq " + std::to_string(Hq) + " Hkv " + std::to_string(Hkv);
    test::expect_close(test::to_f64(out), rows(w.out, cols), tol, tol, "out " + what);
    test::expect_close(test::to_f64(lse), lse_at(w.lse, cols), tol, tol, "lse " + what);
    test::expect_close(test::to_f64(dq), rows(w.dq, cols), tol, tol, "dq " + what);
    test::expect_close(test::to_f64(dk), rows(w.dk, cols), tol, tol, "dk " + what);
    test::expect_close(test::to_f64(dv), rows(w.dv, cols), tol, tol, "dv " + what);
  });
}

TEST(RingAttention, MatchesWholeSequenceAttention) {
  check_ring(2, 4, 2, DType::F32, 2e-5);
  check_ring(4, 4, 1, DType::F32, 2e-5);
  check_ring(3, 2, 2, DType::F32, 2e-5);
  check_ring(2, 4, 2, DType::BF16, 2e-2);
}

TEST(RingAttention, ZigZagChunksBalanceTheCausalWork) {
  auto mesh = comm::test::axes_mesh({1, 1, 1, 4, 1});
  mesh->run([&](int, int rank) {
    nn::CpGroup g{&mesh->comm(rank, "cp")};
    const std::vector<int64_t> cols = g.columns(16);  // 8 chunks of 2
    const std::vector<int64_t> want[4] = {{0, 1, 14, 15}, {2, 3, 12, 13}, {4, 5, 10, 11}, {6, 7, 8, 9}};
    EXPECT_EQ(cols, want[rank]);
    int64_t work = 0;  // causal keys seen by this rank's queries: the same on every rank
    for (int64_t p : cols) work += p + 1;
    EXPECT_EQ(work, 34);
    EXPECT_EQ(nn::ring_bytes_forward(4, 1, 4, 2, 8), 3 * 2 * 4 * 2 * 8 * 4);
  });
}

TEST(RingAttention, RefusesByName) {
  Tensor q = Tensor::zeros({1, 3, 2, 4}, DType::F32), k = Tensor::zeros({1, 3, 2, 4}, DType::F32);
  Tensor out = Tensor::zeros(q.shape(), DType::F32), lse = Tensor::zeros({1, 2, 3}, DType::F32);
  test::expect_invalid([&] { nn::ring_attention_forward(nn::CpGroup{}, q, k, k, out, lse); }, "two chunks");
}

}  // namespace
}  // namespace dt
