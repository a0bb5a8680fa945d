// The GPT's structure and behavior: parameter names, shapes, count and init; determinism;
// config and input validation; the block-range pieces; ignore_index; memorization by SGD.
#include <cmath>
#include <cstdio>

#include "nn/gpt.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

using nn::GPT;
using nn::GPTActs;
using nn::GPTConfig;
using nn::ParamList;

GPTConfig tiny(bool llama_style) {
  GPTConfig c;
  c.vocab_size = 11;
  c.context = 8;
  c.n_layer = 2;
  c.d_model = 8;
  c.n_head = 2;
  c.d_ff = 16;
  if (llama_style) {
    c = c.llama_style();
    c.n_kv_head = 1;
  }
  return c;
}

// The count by formula, independent of the module code.
int64_t expected_params(const GPTConfig& raw) {
  GPTConfig c = raw.resolved();
  const int64_t C = c.d_model, V = c.vocab_size, b = c.bias ? 1 : 0;
  const int64_t qkv = (c.n_head + 2 * c.n_kv_head) * c.head_dim();
  const int64_t fc = c.act == nn::Act::SwiGLU ? 2 * c.d_ff : c.d_ff;
  const int64_t norm = C + (c.norm == nn::NormKind::LayerNorm ? b * C : 0);
  const int64_t block = 2 * norm + (C * qkv + b * qkv) + (C * C + b * C) + (C * fc + b * fc) + (c.d_ff * C + b * C);
  return V * C + (c.pos == nn::PosKind::Learned ? c.context * C : 0) + c.n_layer * block + norm +
         (c.tied_embeddings ? 0 : V * C);
}

std::vector<std::string> names_of(GPT& m) {
  std::vector<std::string> out;
  for (nn::Parameter* p : m.parameters()) out.push_back(p->name);
  return out;
}

TEST(NNGPT, ParameterNamesShapesAndCountMatchTheFormula) {
  GPT gpt2(tiny(false));
  std::vector<std::string> want = {"wte.weight", "wpe.weight"};
  for (std::string b : {"blocks.0.", "blocks.1."})
    for (std::string s : {"ln1.weight", "ln1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight",
                          "attn.proj.bias", "ln2.weight", "ln2.bias", "mlp.fc.weight", "mlp.fc.bias",
                          "mlp.proj.weight", "mlp.proj.bias"})
      want.push_back(b + s);
  want.push_back("ln_f.weight");
  want.push_back("ln_f.bias");
  EXPECT_EQ(names_of(gpt2), want);
  EXPECT_EQ(gpt2.num_parameters(), expected_params(gpt2.config()));

  GPT llama(tiny(true));
  want = {"wte.weight"};
  for (std::string b : {"blocks.0.", "blocks.1."})
    for (std::string s : {"ln1.weight", "attn.qkv.weight", "attn.proj.weight", "ln2.weight", "mlp.fc.weight",
                          "mlp.proj.weight"})
      want.push_back(b + s);
  want.push_back("ln_f.weight");
  want.push_back("lm_head.weight");
  EXPECT_EQ(names_of(llama), want);
  EXPECT_EQ(llama.num_parameters(), expected_params(llama.config()));
  ParamList ps = llama.parameters();
  EXPECT_EQ(ps[2]->value.shape(), (Shape{(2 + 2 * 1) * 4, 8}));  // qkv: [(Hq + 2 Hkv) D, C]
  EXPECT_EQ(ps[5]->value.shape(), (Shape{2 * 16, 8}));           // fused gate|up
  EXPECT_EQ(ps.back()->value.shape(), (Shape{11, 8}));           // lm_head [V, C]

  // The reference size: 6 layers, d_model 384, 6 heads, context 256, byte vocabulary.
  GPTConfig ref;
  ref.vocab_size = 256;
  ref.context = 256;
  ref.n_layer = 6;
  ref.n_head = 6;
  ref.d_model = 384;
  GPT m(ref);
  EXPECT_EQ(m.num_parameters(), expected_params(ref));
  EXPECT_EQ(m.num_parameters(), 10844160);
  std::printf("N = %lld parameters for %s\n", static_cast<long long>(m.num_parameters()), ref.str().c_str());
}

double stddev(const Tensor& t) {
  std::vector<double> v = test::to_f64(t);
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s / v.size());
}

TEST(NNGPT, InitializationFollowsGPT2) {
  GPTConfig c;
  c.vocab_size = 64;
  c.context = 16;
  c.n_layer = 4;
  c.d_model = 64;
  c.n_head = 4;
  GPT m(c);
  const double resid = 0.02 / std::sqrt(2.0 * 4);
  for (nn::Parameter* p : m.parameters()) {
    const std::string& n = p->name;
    if (n.find("ln") != std::string::npos) {
      double want = n.substr(n.size() - 6) == "weight" ? 1.0 : 0.0;
      for (double v : test::to_f64(p->value)) ASSERT_EQ(v, want) << n;
    } else if (n.substr(n.size() - 4) == "bias") {
      EXPECT_EQ(kernels::sum_squares(p->value), 0.0) << n;
    } else {
      bool residual = n.find(".proj.weight") != std::string::npos;
      // >= 4096 samples: the sample std is within a few percent.
      EXPECT_NEAR(stddev(p->value), residual ? resid : 0.02, 0.1 * (residual ? resid : 0.02)) << n;
    }
    EXPECT_EQ(kernels::sum_squares(p->grad), 0.0) << n;
  }
}

struct Data {
  Tensor ids, targets;
};

// n sequences of length T from a fixed generator; targets are the next tokens.
Data data(int64_t n, int64_t T, int64_t vocab, uint32_t seed) {
  std::vector<int32_t> ids, tg;
  uint32_t s = seed;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int32_t> seq;
    for (int64_t t = 0; t <= T; ++t) {
      s = s * 1664525u + 1013904223u;
      seq.push_back(static_cast<int32_t>((s >> 16) % vocab));
    }
    ids.insert(ids.end(), seq.begin(), seq.end() - 1);
    tg.insert(tg.end(), seq.begin() + 1, seq.end());
  }
  return {test::from_ints(ids, {n, T}), test::from_ints(tg, {n, T})};
}

TEST(NNGPT, SameSeedGivesBitwiseIdenticalParametersAndLoss) {
  for (bool llama : {false, true}) {
    GPT a(tiny(llama)), b(tiny(llama));
    GPTConfig other = tiny(llama);
    other.seed = 2;
    GPT c(other);
    ParamList pa = a.parameters(), pb = b.parameters(), pc = c.parameters();
    for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(test::same_bits(pa[i]->value, pb[i]->value)) << pa[i]->name;
    EXPECT_FALSE(test::same_bits(pa[0]->value, pc[0]->value));
    Data d = data(2, 8, 11, 5);
    GPTActs xa, xb;
    double la = a.forward_loss(d.ids, d.targets, xa), lb = b.forward_loss(d.ids, d.targets, xb);
    EXPECT_EQ(std::memcmp(&la, &lb, sizeof la), 0);
    EXPECT_TRUE(test::same_bits(xa.logits, xb.logits));
  }
}

TEST(NNGPT, BadConfigsAndInputsNameTheField) {
  GPTConfig c = tiny(false);
  c.n_head = 3;
  test::expect_invalid([&] { GPT m(c); }, "n_head");
  c = tiny(true);
  c.n_head = 4;
  c.n_kv_head = 3;
  test::expect_invalid([&] { GPT m(c); }, "n_kv_head");
  c = tiny(false);
  c.vocab_size = 0;
  test::expect_invalid([&] { GPT m(c); }, "vocab_size");
  c = tiny(true);
  c.d_model = 6;
  c.n_head = 2;  // head dim 3: rope needs it even
  test::expect_invalid([&] { GPT m(c); }, "rope");

  GPT m(tiny(false));
  GPTActs a;
  Tensor ids = test::from_ints({1, 2, 11, 3}, {1, 4});
  test::expect_invalid([&] { m.forward(ids, a); }, "vocab_size");
  Tensor neg = test::from_ints({1, -1}, {1, 2});
  test::expect_invalid([&] { m.forward(neg, a); }, "vocab_size");
  Tensor longer = test::from_ints(std::vector<int32_t>(9, 1), {1, 9});
  test::expect_invalid([&] { m.forward(longer, a); }, "context");
  Tensor ok = test::from_ints({1, 2}, {1, 2});
  test::expect_invalid([&] { m.forward_loss(ok, test::from_ints({1, 2, 3}, {1, 3}), a); }, "targets");
}

TEST(NNGPT, BlockRangesComposeToTheWholeModel) {
  GPT m(tiny(true));
  Data d = data(2, 6, 11, 9);  // T = 6 < context
  GPTActs whole, parts;
  m.forward(d.ids, whole);
  m.embed(d.ids, parts);
  m.forward_blocks(0, 1, parts);  // as two pipeline stages would
  m.forward_blocks(1, 2, parts);
  EXPECT_TRUE(test::same_bits(m.head(parts), whole.logits));
  test::expect_invalid([&] { m.forward_blocks(1, 3, parts); }, "block range");
}

// Two pipeline stages, each with its own GPTActs, exchanging the stream and its gradient by
// copies: the same gradients, bit for bit, as the whole model in one piece.
TEST(NNGPT, TwoStagesGiveTheWholeModelsGradients) {
  for (bool ckpt : {false, true}) {
    GPTConfig c = tiny(false);
    c.checkpoint = ckpt;
    GPT m(c);
    Data d = data(2, 8, 11, 4);
    GPTActs whole;
    double loss = m.forward_loss(d.ids, d.targets, whole);
    m.backward(whole);
    std::vector<Tensor> want;
    for (nn::Parameter* p : m.parameters()) want.push_back(test::converted(p->grad, DType::F32));
    m.zero_grad();

    GPTActs s0, s1;
    m.embed(d.ids, s0);
    m.forward_blocks(0, 1, s0);
    m.set_stream(1, test::converted(s0.resid[1], DType::F32), s1);  // "send"
    m.forward_blocks(1, 2, s1);
    double loss1 = nn::cross_entropy_loss(m.head(s1), d.targets, -1, s1.ce);
    EXPECT_EQ(loss1, loss);
    Tensor dlogits;
    nn::cross_entropy_loss_backward(s1.logits, d.targets, -1, s1.ce, dlogits);
    m.backward_head(dlogits, s1);
    m.backward_blocks(1, 2, s1);
    s0.dresid = test::converted(s1.dresid, DType::F32);  // "send" the gradient back
    m.backward_blocks(0, 1, s0);
    m.backward_embed(s0);
    ParamList ps = m.parameters();
    for (size_t i = 0; i < ps.size(); ++i) EXPECT_TRUE(test::same_bits(ps[i]->grad, want[i])) << ps[i]->name;
  }
}

TEST(NNGPT, LossIsTheMeanOverTokensNotIgnored) {
  GPT m(tiny(false));
  Data d = data(2, 8, 11, 3);
  GPTActs a;
  m.forward_loss(d.ids, d.targets, a);
  std::vector<double> per_row = test::to_f64(a.ce.losses);
  int32_t* t = d.targets.data<int32_t>();
  t[0] = t[3] = t[15] = -100;
  double want = 0;
  for (int i = 0; i < 16; ++i)
    if (t[i] != -100) want += per_row[i] / 13;
  EXPECT_NEAR(m.forward_loss(d.ids, d.targets, a, -100), want, 1e-6);
  EXPECT_EQ(a.ce.count, 13);
}

// Plain SGD on a few sequences: the loss must fall from ~log(V) to near zero.
void memorize(bool llama) {
  GPTConfig c = tiny(llama);
  c.d_model = 32;
  c.n_head = 4;
  c.d_ff = 64;
  GPT m(c);
  // Seed 26: no sequence starts with a repeated token. With RoPE and no absolute positions,
  // "0 0" at positions 0 and 1 look the same to the model (a relative-position property,
  // not a bug), so differing next tokens there would leave a loss floor of ~log(2) per pair.
  Data d = data(4, 8, 11, 26);
  GPTActs a;
  double first = 0, loss = 0;
  const float lr = 0.5f;
  for (int step = 0; step < 500; ++step) {
    m.zero_grad();
    loss = m.forward_loss(d.ids, d.targets, a);
    if (step == 0) first = loss;
    m.backward(a);
    for (nn::Parameter* p : m.parameters()) {
      float* v = p->value.data<float>();
      const float* g = p->grad.data<float>();
      for (int64_t i = 0; i < p->value.numel(); ++i) v[i] -= lr * g[i];
    }
  }
  std::printf("%s: loss %.4f -> %.4f after 500 SGD steps\n", c.str().c_str(), first, loss);
  EXPECT_NEAR(first, std::log(11.0), 0.1);
  EXPECT_LT(loss, 0.05);
}

TEST(NNGPT, MemorizesAFewSequencesWithSGD) {
  memorize(false);
  memorize(true);
}

}  // namespace
}  // namespace dt
