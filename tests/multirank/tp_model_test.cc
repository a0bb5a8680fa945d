// A GPT whose blocks are tensor parallel (nn::GPT with a tp group) against the single-rank
// GPT, on the local backend: GPT-2 style (LayerNorm, GELU, learned positions) over tp {2, 4}
// and llama style (RMSNorm, SwiGLU, RoPE, GQA with 4 query and 2 KV heads) over tp 2, in f32
// and bf16. The loss and every parameter gradient (each rank's part against its part of the
// single-rank gradient) agree within 1e-5 relative in f32 and 2e-2 in bf16: the all-reduces
// sum partial products in another order than one matmul does. Also: each rank starts with
// its part of the single-rank weights, the blocks cost 2 all-reduces forward and 2 backward
// of B*T*d_model values each (the vocab-parallel embedding and head one more each, the loss
// two small ones), head counts that do not split are named errors, and a vocabulary that
// does not split is padded without the padding reaching the loss or a gradient. With
// sequence parallelism: the same agreement, all-gathers and reduce-scatters of the same
// wire bytes in place of the all-reduces (plus backward's gathers of the regions' inputs
// and the head's), and the norm-region activations per rank exactly 1/tp of tensor
// parallelism alone.
#include <cstdio>
#include <cmath>

#include "multirank/coll_util.h"
#include "multirank/dp_test_util.h"
#include "engine/plan.h"
#include "nn/gpt.h"

namespace dt {
namespace DT_TEST_NS {

constexpr int64_t kB = 2, kT = 8;

nn::GPTConfig config(bool llama, DType dtype) { return test::tp_tiny_gpt(llama, dtype); }

double rel(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num = std::max(num, std::fabs(got[i] - want[i]));
    den = std::max(den, std::fabs(want[i]));
  }
  return den > 0 ? num / den : num;
}

struct Reference {
  double loss = 0;
  std::vector<Tensor> values, grads;  // per parameter, whole
};

Reference single_rank(const nn::GPTConfig& c, const test::TokenBatch& b) {
  nn::GPT m(c);
  nn::GPTActs a;
  Reference r;
  r.loss = m.forward_loss(b.in, b.tg, a);
  m.backward(a);
  for (nn::Parameter* p : m.parameters()) {
    r.values.push_back(p->value);
    r.grads.push_back(p->grad);
  }
  return r;
}

// The bytes of the activations a block's norm regions keep per rank: the stream between
// blocks, the residual midpoint, and the norms' outputs and statistics (their inputs are
// the stream itself).
int64_t norm_region_bytes(const nn::GPTActs& a) {
  auto bytes = [](const Tensor& t) { return t.defined() ? t.numel() * static_cast<int64_t>(dtype_size(t.dtype())) : 0; };
  int64_t n = 0;
  for (const Tensor& r : a.resid) n += bytes(r);
  for (const auto& b : a.blocks)
    n += bytes(b.r) + bytes(b.ln1.y) + bytes(b.ln1.mean) + bytes(b.ln1.rstd) + bytes(b.ln2.y) + bytes(b.ln2.mean) +
         bytes(b.ln2.rstd);
  return n + bytes(a.lnf.y) + bytes(a.lnf.mean) + bytes(a.lnf.rstd);
}

// Runs the tp model (with or without sequence parallelism) against the single-rank one;
// returns rank 0's norm-region activation bytes.
int64_t expect_matches(bool llama, DType dtype, int tp, bool sp = false, int64_t vocab = 0) {
  nn::GPTConfig c = config(llama, dtype);
  if (vocab) c.vocab_size = vocab;
  const test::TokenBatch b = test::random_token_batch(kB, kT, c.vocab_size, 4);
  const Reference ref = single_rank(c, b);
  const double tol = dtype == DType::F32 ? 1e-5 : 2e-2;
  auto mesh = comm::test::axes_mesh({1, 1, 1, 1, tp});
  int64_t norm_bytes = 0;
  const std::string what = "tp " + std::to_string(tp) + (sp ? " sp" : "") + " vocab " + std::to_string(c.vocab_size);
  mesh->run([&](int, int rank) {
    comm::Communicator& comm = mesh->comm(rank, "tp");
    const nn::TpGroup g{&comm, sp};
    nn::GPT m(c, g);
    const nn::ParamList ps = m.parameters();
    // The per-rank formula (dtrain plan's) against the built parts.
    int64_t held = 0, whole = 0, formula_whole = 0;
    for (const nn::Parameter* q : ps) (q->spec.replicated() ? whole : held) += q->numel();
    EXPECT_EQ(c.param_count(tp, &formula_whole), held + whole) << what;
    EXPECT_EQ(formula_whole, whole) << what;
    ASSERT_EQ(ps.size(), ref.grads.size());
    for (size_t k = 0; k < ps.size(); ++k)
      EXPECT_TRUE(test::same_bits(ps[k]->value, nn::take_shard(ref.values[k], ps[k]->spec, comm.rank(), tp)))
          << ps[k]->name << " does not start as its part of the single-rank value";
    auto count = [&](comm::CollKind k) { return comm.ledger().get(k); };
    const comm::CollStats ar0 = count(comm::CollKind::AllReduce), ag0 = count(comm::CollKind::AllGather),
                          rs0 = count(comm::CollKind::ReduceScatter);
    nn::GPTActs a;
    const double loss = m.forward_loss(b.in, b.tg, a);
    m.backward(a);
    const comm::CollStats ar = count(comm::CollKind::AllReduce), ag = count(comm::CollKind::AllGather),
                          rs = count(comm::CollKind::ReduceScatter);
    // Under SP the norms' gradients are partial sums over tp (the TP strategy sums them).
    for (nn::Parameter* p : ps)
      if (p->grad_partial_over_tp) nn::all_reduce_sum(g, p->grad);
    EXPECT_NEAR(loss, ref.loss, tol * std::fabs(ref.loss)) << what << " rank " << rank;
    for (size_t k = 0; k < ps.size(); ++k) {
      const Tensor want = nn::take_shard(ref.grads[k], ps[k]->spec, comm.rank(), tp);
      EXPECT_LT(rel(test::to_f64(ps[k]->grad), test::to_f64(want)), tol)
          << ps[k]->name << " (" << ps[k]->spec.str() << ") " << what << " rank " << rank;
    }
    // Per block: attention and MLP, one all-reduce each forward and backward, of S = B*T*d
    // values, 2 (n-1)/n S on the wire; the vocab-parallel embedding one forward and the head
    // one backward; the loss two of f32 [R] and [R, 2]. Under SP an all-gather and a
    // reduce-scatter in place of each of S ((n-1)/n S each: the same wire bytes), plus
    // backward's all-gather of each region's input again (Megatron's choice: memory over
    // traffic).
    const int64_t S = kB * kT * c.d_model * static_cast<int64_t>(dtype_size(dtype)), L = c.n_layer;
    const int64_t ring = 2 * (tp - 1) * S / tp, R = kB * kT, loss_bytes = 3 * R * 4;
    const int64_t loss_wire = 2 * (tp - 1) * loss_bytes / tp;
    // KV heads held by several ranks (n_kv_head < tp): per block one all-reduce of every KV
    // head's K and V weight gradients (each summed over the ranks holding it).
    const int64_t kv_heads = c.resolved().n_kv_head, kv_calls = kv_heads < tp ? L : 0;
    const int64_t kv_bytes = kv_calls * kv_heads * 2 * (c.d_model / c.n_head) * c.d_model *
                             static_cast<int64_t>(dtype_size(dtype));
    const int64_t kv_wire = 2 * (tp - 1) * kv_bytes / tp;
    if (!sp) {
      EXPECT_EQ(ar.calls - ar0.calls, 4 * L + 4 + kv_calls);
      EXPECT_EQ(ar.bytes - ar0.bytes, (4 * L + 2) * S + loss_bytes + kv_bytes);
      EXPECT_EQ(ar.wire_bytes - ar0.wire_bytes, (4 * L + 2) * ring + loss_wire + kv_wire);
    } else {
      EXPECT_EQ(ar.calls - ar0.calls, 2 + kv_calls);
      EXPECT_EQ(ar.bytes - ar0.bytes, loss_bytes + kv_bytes);
      EXPECT_EQ(ag.calls - ag0.calls, 6 * L + 2);
      EXPECT_EQ(rs.calls - rs0.calls, 4 * L + 2);
      EXPECT_EQ(ag.bytes - ag0.bytes, (6 * L + 2) * S / tp);  // each rank's piece
      EXPECT_EQ(rs.bytes - rs0.bytes, (4 * L + 2) * S);       // each rank's whole partial
      EXPECT_EQ(ag.wire_bytes - ag0.wire_bytes + rs.wire_bytes - rs0.wire_bytes, (5 * L + 2) * ring);
    }
    // dtrain plan's formula (engine::plan_json, dt_plan_json) gives the same wire bytes.
    engine::PlanOptions po;
    po.tp = tp;
    po.sequence_parallel = sp;
    po.micro_batch = kB;
    po.seq_len = kT;
    const double planned = engine::plan_json(c, po)["tp_comm"]["wire_bytes_per_micro_batch"].get<double>();
    EXPECT_EQ(static_cast<double>(ar.wire_bytes - ar0.wire_bytes + ag.wire_bytes - ag0.wire_bytes + rs.wire_bytes -
                                  rs0.wire_bytes),
              planned)
        << what;
    if (rank == 0) norm_bytes = norm_region_bytes(a);
  });
  return norm_bytes;
}

TEST(TpModel, Gpt2StyleMatchesSingleRank) {
  for (DType dtype : {DType::F32, DType::BF16})
    for (int tp : {2, 4}) expect_matches(false, dtype, tp);
}

TEST(TpModel, LlamaStyleWithGqaMatchesSingleRank) {
  for (DType dtype : {DType::F32, DType::BF16}) expect_matches(true, dtype, 2);
}

TEST(TpModel, SequenceParallelMatchesSingleRank) {
  for (DType dtype : {DType::F32, DType::BF16})
    for (int tp : {2, 4}) expect_matches(false, dtype, tp, true);
  for (DType dtype : {DType::F32, DType::BF16}) expect_matches(true, dtype, 2, true);
}

TEST(TpModel, VocabularyThatDoesNotSplitIsPadded) {
  // 30 ids over tp 4: parts of 8 rows, the last holding 6 ids and 2 rows of padding; 31
  // over tp 2. The padding stays zero and gets no gradient (expect_matches compares every
  // part, padding included, with take_shard of the single-rank tensor, which zero-fills it).
  for (bool sp : {false, true}) {
    expect_matches(false, DType::F32, 4, sp, 30);
    expect_matches(true, DType::F32, 2, sp, 31);
  }
  auto mesh = comm::test::axes_mesh({1, 1, 1, 1, 4});
  mesh->run([&](int, int rank) {
    nn::GPTConfig c = config(false, DType::F32);
    c.vocab_size = 3;  // 1 row per rank: the last would hold none
    test::expect_invalid([&] { nn::GPT m(c, nn::TpGroup{&mesh->comm(rank, "tp")}); },
                         "vocab_size = 3 over tp = 4: the last rank's slice would hold no id");
  });
}

TEST(TpModel, SequenceParallelKeepsOneTpthOfTheNormRegions) {
  for (int tp : {2, 4}) {
    const int64_t plain = expect_matches(false, DType::F32, tp), split = expect_matches(false, DType::F32, tp, true);
    EXPECT_EQ(split * tp, plain) << "tp " << tp;
    std::printf("tp %d: norm-region activations per rank %lld bytes, with SP %lld\n", tp,
                static_cast<long long>(plain), static_cast<long long>(split));
  }
}

TEST(TpModel, FewerKvHeadsThanRanksAreReplicated) {
  // 2 KV heads over tp 4: each held by the 2 ranks whose query heads read it, its K and V
  // gradients summed over them (expect_matches compares each rank's part, replicas included).
  for (DType dtype : {DType::F32, DType::BF16})
    for (bool sp : {false, true}) expect_matches(true, dtype, 4, sp);
}

TEST(TpModel, HeadsThatDoNotSplitAreNamed) {
  auto mesh = comm::test::axes_mesh({1, 1, 1, 1, 3});
  mesh->run([&](int, int rank) {
    nn::TpGroup g{&mesh->comm(rank, "tp")};
    // 2 KV heads over tp 3: neither divides the other; the error says what would work.
    nn::GPTConfig c = config(true, DType::F32);
    c.n_head = 6;
    c.d_model = 36;
    test::expect_invalid([&] { nn::GPT m(c, g); },
                         "blocks.0.attn: n_kv_head = 2 over tp = 3: neither divides the other; accepted: a tp size "
                         "that divides 2 or is a multiple of it");
    c.n_head = 4;  // 4 query heads over tp 3
    c.d_model = 32;
    test::expect_invalid([&] { nn::GPT m(c, g); }, "blocks.0.attn: n_head = 4 does not split over tp = 3");
  });
}

}  // namespace
}  // namespace dt
