// Mixture of experts (nn/moe.h): the routing kernel against a naive one (top-k order and
// ties, softmax and sigmoid gates, renormalised or not); dispatch then combine returns its
// input exactly, with the gradient of the identity; the capacity rule (an expert keeps its
// earliest rows, the rest dropped and counted); a bad slot refused before anything is
// written; the module's output against a dense reference of the same experts; its gradients
// (input, router, experts) against central differences of the output's projection plus the
// load-balancing and z losses; and a small Mixtral-style GPT that learns.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "core/random_fill.h"
#include "engine/trainer.h"
#include "nn/gpt.h"
#include "nn/moe.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

using kernels::MoeGating;

struct Route {
  Tensor idx, gates, probs, lse;
};

Route route(const Tensor& logits, int64_t k, MoeGating g, bool renorm) {
  const int64_t R = logits.dim(0), E = logits.dim(1);
  Route r{Tensor::zeros({R, k}, DType::I32), Tensor::zeros({R, k}, DType::F32), Tensor::zeros({R, E}, DType::F32),
          Tensor::zeros({R}, DType::F32)};
  kernels::moe_route(logits, k, g, renorm, r.idx, r.gates, r.probs, r.lse);
  return r;
}

TEST(MoeKernels, RouteMatchesNaiveTopKAndGates) {
  const int64_t R = 13, E = 5;
  Tensor logits = test::randn({R, E}, DType::F32, 3, "logits", 2.0f);
  logits.data<float>()[2 * E + 1] = logits.data<float>()[2 * E + 3] = 9.0f;  // a tie: the lower expert first
  for (int64_t k : {1, 2, 3})
    for (MoeGating g : {MoeGating::Softmax, MoeGating::Sigmoid})
      for (bool renorm : {true, false}) {
        SCOPED_TRACE(std::to_string(k) + kernels::moe_gating_name(g) + (renorm ? " renorm" : ""));
        const Route r = route(logits, k, g, renorm);
        for (int64_t i = 0; i < R; ++i) {
          const float* z = logits.data<float>() + i * E;
          std::vector<int> order(E);
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return z[a] > z[b]; });
          double mx = *std::max_element(z, z + E), sum = 0;
          for (int64_t e = 0; e < E; ++e) sum += std::exp(z[e] - mx);
          const double lse = mx + std::log(sum);
          EXPECT_NEAR(r.lse.data<float>()[i], lse, 1e-5);
          double total = 0;
          std::vector<double> score(k);
          for (int64_t j = 0; j < k; ++j) {
            EXPECT_EQ(r.idx.data<int32_t>()[i * k + j], order[j]) << "row " << i << " choice " << j;
            const double zz = z[order[j]];
            score[j] = g == MoeGating::Softmax ? std::exp(zz - lse) : 1 / (1 + std::exp(-zz));
            total += score[j];
          }
          for (int64_t j = 0; j < k; ++j)
            EXPECT_NEAR(r.gates.data<float>()[i * k + j], renorm ? score[j] / total : score[j], 1e-6);
          for (int64_t e = 0; e < E; ++e) EXPECT_NEAR(r.probs.data<float>()[i * E + e], std::exp(z[e] - lse), 1e-6);
        }
        EXPECT_EQ(r.idx.data<int32_t>()[2 * k], 1);  // the tied row picks expert 1 before 3
      }
}

TEST(MoeKernels, DispatchThenCombineIsTheIdentityWithItsGradient) {
  const int64_t R = 9, C = 6, E = 4;
  for (DType dt : {DType::F32, DType::BF16}) {
    const Tensor x = test::randn({R, C}, dt, 5, "x");
    std::vector<int32_t> idx(R);
    for (int64_t r = 0; r < R; ++r) idx[r] = static_cast<int32_t>((r * 3 + 1) % E);
    std::vector<int64_t> tokens, picked;
    int64_t dropped = -1;
    const std::vector<int32_t> s = nn::route_slots(idx.data(), R, 1, E, 0, tokens, picked, dropped);
    EXPECT_EQ(dropped, 0);
    const Tensor slots = test::from_ints(s, {R, 1});
    const Tensor ones = test::from_vec(std::vector<float>(R, 1.0f), {R, 1});
    Tensor xp = Tensor::zeros({R, C}, dt), out = Tensor::zeros({R, C}, dt);
    kernels::moe_permute(x, slots, xp);
    kernels::moe_unpermute(xp, slots, ones, out);
    EXPECT_TRUE(test::same_bits(out, x));
    // Rows of each expert are contiguous, in row order.
    for (int64_t r = 1; r < R; ++r)
      if (idx[r] == idx[r - 1]) EXPECT_EQ(s[r], s[r - 1] + 1);
    const Tensor dout = test::randn({R, C}, dt, 6, "dout");
    Tensor dxp = Tensor::zeros({R, C}, dt), dx = Tensor::zeros({R, C}, dt), dg = Tensor::zeros({R, 1}, DType::F32);
    kernels::moe_unpermute_backward(dout, xp, slots, ones, dxp, dg);
    kernels::moe_permute_backward(dxp, slots, dx);
    EXPECT_TRUE(test::same_bits(dx, dout));
    for (int64_t r = 0; r < R; ++r) {  // d out / d gate = <dout, y>
      double dot = 0;
      const std::vector<double> a = test::to_f64(dout), b = test::to_f64(x);
      for (int64_t c = 0; c < C; ++c) dot += a[r * C + c] * b[r * C + c];
      EXPECT_NEAR(dg.data<float>()[r], dot, 1e-4);
    }
  }
}

TEST(MoeKernels, ASlotOutOfRangeIsRefusedBeforeAnythingIsWritten) {
  const Tensor x = test::randn({3, 4}, DType::F32, 1);
  Tensor xp = Tensor::zeros({3, 4}, DType::F32);
  const Tensor bad = test::from_ints({0, 1, 3}, {3, 1});
  test::expect_invalid([&] { kernels::moe_permute(x, bad, xp); }, "slots entry 2 holds 3");
  EXPECT_EQ(test::to_f64(xp), std::vector<double>(12, 0.0));
  test::expect_invalid([&] { kernels::moe_permute(x, test::from_ints({0, 1}, {2, 1}), xp); }, "slots has shape");
}

TEST(MoeRouting, CapacityKeepsEachExpertsEarliestRowsAndCountsTheDrops) {
  // 6 rows, top 2 over 3 experts; capacity ceil(0.5 * 6 * 2 / 3) = 2 per expert.
  const std::vector<int32_t> idx = {0, 1, 0, 2, 0, 1, 1, 0, 2, 1, 2, 0};
  std::vector<int64_t> tokens, picked;
  int64_t dropped = 0;
  const int64_t cap = nn::expert_capacity(0.5f, 6, 2, 3);
  ASSERT_EQ(cap, 2);
  const std::vector<int32_t> s = nn::route_slots(idx.data(), 6, 2, 3, cap, tokens, picked, dropped);
  EXPECT_EQ(picked, (std::vector<int64_t>{5, 4, 3}));
  EXPECT_EQ(tokens, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(dropped, 6);
  // Expert 0 keeps rows 0 and 1, expert 1 rows 0 and 2, expert 2 rows 1 and 4.
  EXPECT_EQ(s, (std::vector<int32_t>{0, 2, 1, 4, -1, 3, -1, -1, 5, -1, -1, -1}));
  std::vector<int64_t> t2, p2;
  int64_t d2 = 0;
  nn::route_slots(idx.data(), 6, 2, 3, 0, t2, p2, d2);  // dropless
  EXPECT_EQ(t2, p2);
  EXPECT_EQ(d2, 0);
}

// shared: a shared expert of width 6, gated (Qwen2-MoE) when `shared_gate`.
nn::GPTConfig moe_config(MoeGating g, bool renorm, float capacity, DType dtype = DType::F32, bool shared = false,
                         bool shared_gate = false) {
  nn::GPTConfig c;
  c = c.llama_style();
  c.d_model = 8;
  c.n_head = 2;
  c.d_ff = 12;
  c.n_layer = 1;
  c.context = 8;
  c.vocab_size = 11;
  c.n_experts = 4;
  c.top_k = 2;
  c.moe_gating = g;
  c.moe_renormalize = renorm;
  c.moe_capacity = capacity;
  c.moe_aux_coef = 0.3f;  // large, so the auxiliary terms show in the differences
  c.moe_z_coef = 0.05f;
  c.dtype = dtype;
  c.seed = 11;
  c.moe_shared_d_ff = shared ? 6 : 0;
  c.moe_shared_gate = shared_gate;
  return c.resolved();
}

void perturb(nn::Module& m) {
  for (nn::Parameter* p : m.parameters()) fill_random(p->value, Distribution::Normal, 99, p->name, 0, 0.0f, 0.5f);
}

TEST(MoE, ForwardMatchesADenseReferenceOfTheSameExperts) {
  for (int shared = 0; shared < 3; ++shared)
  for (float capacity : {0.0f, 0.6f}) {
    SCOPED_TRACE(shared == 0 ? "no shared expert" : shared == 1 ? "a shared expert" : "a gated shared expert");
    const nn::GPTConfig c = moe_config(MoeGating::Softmax, true, capacity, DType::F32, shared > 0, shared == 2);
    nn::MoE moe("moe", c, 0.02f);
    perturb(moe);
    const int64_t R = 10, C = c.d_model;
    const Tensor x = test::randn({R, C}, DType::F32, 4, "x");
    nn::MoE::Acts a;
    const std::vector<double> y = test::to_f64(moe.forward(x, a));
    const std::vector<int32_t> slots(a.slots.data<int32_t>(), a.slots.data<int32_t>() + R * c.top_k);
    // Every expert on every row, weighted by the gate where the row chose it and kept.
    std::vector<double> ref(static_cast<size_t>(R * C), 0.0);
    for (int64_t e = 0; e < c.n_experts; ++e) {
      nn::MLP::Acts ea;
      const std::vector<double> ye = test::to_f64(moe.experts[static_cast<size_t>(e)]->forward(x, ea));
      for (int64_t r = 0; r < R; ++r)
        for (int64_t j = 0; j < c.top_k; ++j)
          if (a.idx.data<int32_t>()[r * c.top_k + j] == e && slots[static_cast<size_t>(r * c.top_k + j)] >= 0)
            for (int64_t i = 0; i < C; ++i)
              ref[static_cast<size_t>(r * C + i)] += a.gates.data<float>()[r * c.top_k + j] * ye[static_cast<size_t>(r * C + i)];
    }
    if (moe.shared) {  // every row, times sigmoid(x . w) when gated
      nn::MLP::Acts sa;
      const std::vector<double> ys = test::to_f64(moe.shared->forward(x, sa));
      const std::vector<double> w = moe.shared_gate ? test::to_f64(moe.shared_gate->weight.value) : std::vector<double>();
      for (int64_t r = 0; r < R; ++r) {
        double z = 0;
        for (int64_t i = 0; i < C && !w.empty(); ++i) z += w[static_cast<size_t>(i)] * x.data<float>()[r * C + i];
        const double g = w.empty() ? 1.0 : 1.0 / (1.0 + std::exp(-z));
        for (int64_t i = 0; i < C; ++i) ref[static_cast<size_t>(r * C + i)] += g * ys[static_cast<size_t>(r * C + i)];
      }
    }
    test::expect_close(y, ref, 1e-6, 1e-5, capacity > 0 ? "capacity 0.6" : "dropless");
    int64_t kept = 0;
    for (int64_t n : a.stats.tokens) kept += n;
    EXPECT_EQ(kept + a.stats.dropped, R * c.top_k);
    if (capacity > 0) EXPECT_GT(a.stats.dropped, 0);
    EXPECT_GT(a.stats.aux_loss, 0);
    EXPECT_GT(a.stats.z_loss, 0);
  }
}

// The objective the gradients are of: <y, G> + the load-balancing and z losses.
double objective(nn::MoE& moe, const Tensor& x, const std::vector<double>& G, nn::MoE::Acts& a) {
  const std::vector<double> y = test::to_f64(moe.forward(x, a));
  return test::dot(y, G) + a.stats.aux_loss + a.stats.z_loss;
}

TEST(MoE, GradientsMatchCentralDifferencesOfOutputAndAuxiliaryLosses) {
  struct Case {
    MoeGating g;
    bool renorm;
    float capacity;
    int shared;  // 1: a shared expert, 2: gated
  };
  for (Case k : {Case{MoeGating::Softmax, true, 0.0f, 0}, Case{MoeGating::Softmax, false, 0.0f, 0},
                 Case{MoeGating::Sigmoid, true, 0.0f, 0}, Case{MoeGating::Softmax, true, 0.6f, 0},
                 Case{MoeGating::Softmax, true, 0.0f, 1}, Case{MoeGating::Softmax, false, 0.0f, 2}}) {
    const std::string what = std::string(kernels::moe_gating_name(k.g)) + (k.renorm ? " renorm" : "") +
                             (k.capacity > 0 ? " capacity" : "") +
                             (k.shared == 1 ? " shared" : k.shared == 2 ? " gated shared" : "");
    SCOPED_TRACE(what);
    const nn::GPTConfig c = moe_config(k.g, k.renorm, k.capacity, DType::F32, k.shared > 0, k.shared == 2);
    nn::MoE moe("moe", c, 0.02f);
    perturb(moe);
    const int64_t R = 10, C = c.d_model;
    Tensor x = test::randn({R, C}, DType::F32, 4, "x");
    const std::vector<double> G = test::to_f64(test::randn({R, C}, DType::F32, 8, "G"));
    nn::MoE::Acts a;
    objective(moe, x, G, a);
    const std::vector<int32_t> idx0(a.idx.data<int32_t>(), a.idx.data<int32_t>() + a.idx.numel());
    const std::vector<int32_t> slots0(a.slots.data<int32_t>(), a.slots.data<int32_t>() + a.slots.numel());
    moe.zero_grad();
    Tensor dx;
    moe.backward(test::from_vec(std::vector<float>(G.begin(), G.end()), {R, C}), a, dx, 1.0f);
    const std::vector<double> dx_got = test::to_f64(dx);
    // A difference counts only where both sides route as the point itself does.
    int checked = 0, skipped = 0;
    auto check = [&](float* v, double got, const std::string& name) {
      bool same = true;
      const double num = test::central_diff(v, 1e-2f, [&] {
        nn::MoE::Acts b;
        const double f = objective(moe, x, G, b);
        same = same && std::equal(idx0.begin(), idx0.end(), b.idx.data<int32_t>()) &&
               std::equal(slots0.begin(), slots0.end(), b.slots.data<int32_t>());
        return f;
      });
      if (!same) {
        ++skipped;
        return;
      }
      ++checked;
      EXPECT_NEAR(got, num, 2e-3 + 2e-2 * std::abs(num)) << name;
    };
    for (int64_t i = 0; i < R * C; i += 7) check(x.data<float>() + i, dx_got[static_cast<size_t>(i)], "x[" + std::to_string(i) + "]");
    for (nn::Parameter* p : moe.parameters()) {
      const std::vector<double> g = test::to_f64(p->grad);
      for (int64_t i = 0; i < p->value.numel(); i += std::max<int64_t>(1, p->value.numel() / 6))
        check(p->value.data<float>() + i, g[static_cast<size_t>(i)], p->name + "[" + std::to_string(i) + "]");
    }
    std::printf("%s: %d differences checked, %d skipped (routing changed)\n", what.c_str(), checked, skipped);
    EXPECT_GT(checked, 5 * skipped);
  }
}

TEST(MoE, AMixtralStyleGptLearnsAndReportsItsRouting) {
  for (const char* preset : {"mixtral-tiny", "qwen2-moe-tiny"}) {
  nn::GPTConfig c = *nn::gpt_preset(preset);
  c.vocab_size = 32;
  c.context = 16;
  nn::GPT model(c);
  EXPECT_EQ(model.num_parameters(), c.param_count());
  optim::AdamW opt(model.parameters(), optim::AdamWOptions{3e-3f, 0.9f, 0.95f, 1e-8f, 0.0f});
  engine::TrainOptions o;
  o.micro_batches = 2;
  engine::Trainer t(nullptr, model, opt, o);
  const test::TokenBatch b = test::random_token_batch(8, 16, 32, 3);
  double first = 0, last = 0;
  for (int s = 0; s < 40; ++s) {
    const double loss = t.train_step(b.in, b.tg).loss;
    if (s == 0) first = loss;
    last = loss;
  }
  std::printf("%s: loss %.3f -> %.3f in 40 steps\n", preset, first, last);
  EXPECT_LT(last, 0.7 * first) << preset;
  }
}

TEST(MoE, BadConfigurationsAreRefusedByName) {
  nn::GPTConfig c = moe_config(MoeGating::Softmax, true, 0.0f);
  c.top_k = 5;
  test::expect_invalid([&] { nn::validate(c); }, "GPTConfig.top_k = 5; accepted: 1 to n_experts = 4");
  c.top_k = 2;
  c.moe_capacity = 0.001f;
  test::expect_invalid([&] { nn::validate(c); }, "GPTConfig.moe_capacity");
  c.moe_capacity = 0;
  c.moe_aux_coef = -1;
  test::expect_invalid([&] { nn::validate(c); }, "GPTConfig.moe_aux_coef");
  c.moe_aux_coef = 0.01f;
  c.moe_shared_gate = true;
  test::expect_invalid([&] { nn::validate(c); }, "GPTConfig.moe_shared_gate needs a shared expert");
  c.moe_shared_d_ff = 16;
  c.n_experts = 0;
  test::expect_invalid([&] { nn::validate(c); }, "GPTConfig.moe_shared_d_ff = 16 (a shared expert) needs a mixture");
}

}  // namespace
}  // namespace dt
