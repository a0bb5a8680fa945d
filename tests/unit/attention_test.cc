// Fused causal GQA attention against a naive double-precision softmax(Q K^T * scale + mask) V.
#include <cmath>
#include <cstring>

#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

using Vec = std::vector<double>;

struct Cfg {
  int64_t b, tq, tk, hq, hkv, d;
  float scale = 0.0f;  // <= 0: 1/sqrt(d)
  bool causal = true;  // false: every query sees every key (any tq, tk)
  Shape qshape() const { return {b, tq, hq, d}; }
  Shape kshape() const { return {b, tk, hkv, d}; }
  double eff_scale() const { return scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(d)); }
};

// The whole score row is built per query (fine for a reference); query i sits at tk - tq + i.
Vec attention_ref(const Cfg& c, const Vec& q, const Vec& k, const Vec& v, Vec* lse = nullptr) {
  Vec out(q.size());
  if (lse) lse->assign(c.b * c.hq * c.tq, 0.0);
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.hq; ++h)
      for (int64_t i = 0; i < c.tq; ++i) {
        int64_t g = h / (c.hq / c.hkv), last = c.causal ? c.tk - c.tq + i : c.tk - 1;
        const double* qi = &q[((b * c.tq + i) * c.hq + h) * c.d];
        Vec s(last + 1);
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j <= last; ++j) {
          s[j] = 0;
          for (int64_t e = 0; e < c.d; ++e) s[j] += qi[e] * k[((b * c.tk + j) * c.hkv + g) * c.d + e];
          s[j] *= c.eff_scale();
          mx = std::max(mx, s[j]);
        }
        for (int64_t j = 0; j <= last; ++j) sum += std::exp(s[j] - mx);
        double* oi = &out[((b * c.tq + i) * c.hq + h) * c.d];
        for (int64_t j = 0; j <= last; ++j)
          for (int64_t e = 0; e < c.d; ++e)
            oi[e] += std::exp(s[j] - mx) / sum * v[((b * c.tk + j) * c.hkv + g) * c.d + e];
        if (lse) (*lse)[(b * c.hq + h) * c.tq + i] = mx + std::log(sum);
      }
  return out;
}

struct Result {
  Tensor q, k, v, out, lse, dout, dq, dk, dv;
};

// Forward and backward on random inputs of dtype t; `amp` scales q and k (to make huge scores).
Result run(const Cfg& c, DType t = DType::F32, float amp = 1.0f, uint64_t seed = 1) {
  Result r{test::randn(c.qshape(), t, seed, "q", amp), test::randn(c.kshape(), t, seed, "k", amp),
        test::randn(c.kshape(), t, seed, "v"),      Tensor::zeros(c.qshape(), t),
        Tensor::zeros({c.b, c.hq, c.tq}, DType::F32), test::randn(c.qshape(), t, seed, "dout"),
        Tensor::zeros(c.qshape(), t),               Tensor::zeros(c.kshape(), t),
        Tensor::zeros(c.kshape(), t)};
  kernels::attention_forward(r.q, r.k, r.v, c.scale, r.out, r.lse, c.causal);
  kernels::attention_backward(r.q, r.k, r.v, r.out, r.lse, r.dout, c.scale, r.dq, r.dk, r.dv, c.causal);
  return r;
}

const Cfg kShapes[] = {{2, 7, 7, 4, 2, 8}, {2, 1, 9, 4, 2, 8}, {1, 3, 9, 6, 2, 8, 0.3f}, {1, 5, 5, 2, 2, 4}};
// Every query over every key (context parallelism's K/V blocks in the past): more queries
// than keys, fewer, and more than one query tile.
const Cfg kFull[] = {{2, 9, 4, 4, 2, 8, 0.0f, false}, {1, 3, 7, 2, 1, 8, 0.0f, false},
                     {1, 70, 5, 2, 2, 4, 0.0f, false}};

// f32 compute of short dot products and softmax: errors ~1e-6; tolerances leave 10x room.
TEST(Attention, ForwardAndLseMatchReference) {
  std::vector<Cfg> all(std::begin(kShapes), std::end(kShapes));
  all.insert(all.end(), std::begin(kFull), std::end(kFull));
  for (const Cfg& c : all) {
    Result r = run(c);
    Vec lse;
    Vec want = attention_ref(c, test::to_f64(r.q), test::to_f64(r.k), test::to_f64(r.v), &lse);
    std::string what = "Tq=" + std::to_string(c.tq) + " Tk=" + std::to_string(c.tk) + (c.causal ? "" : " full");
    test::expect_close(test::to_f64(r.out), want, 1e-5, 1e-4, "out " + what);
    test::expect_close(test::to_f64(r.lse), lse, 1e-5, 1e-5, "lse " + what);
  }
}

// Every gradient against central differences of loss = dot(attention_ref(q, k, v), dout).
TEST(Attention, BackwardMatchesFiniteDifferences) {
  for (const Cfg& c : {kShapes[0], kShapes[1], kShapes[2], kFull[0], kFull[1]}) {
    Result r = run(c);
    Vec q = test::to_f64(r.q), k = test::to_f64(r.k), v = test::to_f64(r.v), dout = test::to_f64(r.dout);
    auto fq = [&](const Vec& x) { return test::dot(attention_ref(c, x, k, v), dout); };
    auto fk = [&](const Vec& x) { return test::dot(attention_ref(c, q, x, v), dout); };
    auto fv = [&](const Vec& x) { return test::dot(attention_ref(c, q, k, x), dout); };
    std::string what = " Tq=" + std::to_string(c.tq) + " Tk=" + std::to_string(c.tk) + (c.causal ? "" : " full");
    test::expect_close(test::to_f64(r.dq), test::finite_diff(fq, q), 1e-4, 1e-3, "dq" + what);
    test::expect_close(test::to_f64(r.dk), test::finite_diff(fk, k), 1e-4, 1e-3, "dk" + what);
    test::expect_close(test::to_f64(r.dv), test::finite_diff(fv, v), 1e-4, 1e-3, "dv" + what);
  }
}

// Scores near 1e4: the online softmax must not overflow. An f32 score of 1e4 carries an
// absolute error ~1e-3, so probabilities (and out) are good to ~1e-3 relative.
TEST(Attention, StableForHugeScores) {
  Cfg c{1, 6, 6, 2, 1, 8};
  Result r = run(c, DType::F32, 60.0f, 5);
  Vec lse;
  Vec want = attention_ref(c, test::to_f64(r.q), test::to_f64(r.k), test::to_f64(r.v), &lse);
  double biggest = 0;
  for (double x : lse) biggest = std::max(biggest, std::fabs(x));
  EXPECT_GT(biggest, 1e3);
  test::expect_close(test::to_f64(r.out), want, 1e-2, 1e-2, "out at huge scores");
  test::expect_close(test::to_f64(r.lse), lse, 1e-2, 1e-6, "lse at huge scores");
  for (double x : test::to_f64(r.dq)) ASSERT_TRUE(std::isfinite(x));
}

// bf16/f16 inputs compute in f32 and round once; compare with the reference on the rounded
// inputs, to the output's own precision (bf16 ~4e-3 relative).
TEST(Attention, HalfPrecisionComputesInF32) {
  for (DType t : {DType::BF16, DType::F16}) {
    Cfg c = kShapes[0];
    Result r = run(c, t), r32 = run(c, DType::F32);
    Vec want = attention_ref(c, test::to_f64(r.q), test::to_f64(r.k), test::to_f64(r.v));
    test::expect_close(test::to_f64(r.out), want, 1e-2, 1e-2, std::string("out ") + dtype_name(t));
    test::expect_close(test::to_f64(r.dv), test::to_f64(r32.dv), 5e-2, 5e-2, std::string("dv ") + dtype_name(t));
  }
}

bool same_bits(const Tensor& a, const Tensor& b) { return std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0; }

TEST(Attention, BitwiseIdenticalForOneAndTwoThreads) {
  int keep = kernel_threads();
  Cfg c{2, 40, 48, 4, 2, 16};
  set_kernel_threads(1);
  Result one = run(c);
  set_kernel_threads(2);
  Result two = run(c);
  set_kernel_threads(keep);
  EXPECT_TRUE(same_bits(one.out, two.out));
  EXPECT_TRUE(same_bits(one.lse, two.lse));
  EXPECT_TRUE(same_bits(one.dq, two.dq));
  EXPECT_TRUE(same_bits(one.dk, two.dk));
  EXPECT_TRUE(same_bits(one.dv, two.dv));
}

using test::expect_invalid;

TEST(Attention, RejectsBadArguments) {
  Tensor q = Tensor::zeros({1, 4, 3, 8}, DType::F32), k = Tensor::zeros({1, 4, 2, 8}, DType::F32);
  Tensor out = Tensor::zeros(q.shape(), DType::F32), lse = Tensor::zeros({1, 3, 4}, DType::F32);
  expect_invalid([&] { kernels::attention_forward(q, k, k, 0, out, lse); }, "Hq a multiple of Hkv");
  Tensor q2 = Tensor::zeros({1, 5, 2, 8}, DType::F32), o2 = Tensor::zeros(q2.shape(), DType::F32);
  Tensor l2 = Tensor::zeros({1, 2, 5}, DType::F32);
  expect_invalid([&] { kernels::attention_forward(q2, k, k, 0, o2, l2); }, "Tq <= Tk");
  Tensor q3 = Tensor::zeros({1, 4, 2, 8}, DType::F32), o3 = Tensor::zeros(q3.shape(), DType::F32);
  Tensor l3 = Tensor::zeros({1, 2, 4}, DType::BF16);
  expect_invalid([&] { kernels::attention_forward(q3, k, k, 0, o3, l3); }, "lse has dtype bf16");
  Tensor l4 = Tensor::zeros({1, 4, 2}, DType::F32);
  expect_invalid([&] { kernels::attention_forward(q3, k, k, 0, o3, l4); }, "lse has shape [1, 4, 2]");
  Tensor vb = Tensor::zeros(k.shape(), DType::BF16), l5 = Tensor::zeros({1, 2, 4}, DType::F32);
  expect_invalid([&] { kernels::attention_forward(q3, k, vb, 0, o3, l5); }, "v has dtype bf16");
}

}  // namespace
}  // namespace dt

namespace dt {
namespace DT_TEST_NS {

// Analytic backward in double (dS = P * (dP - rowsum(dO * O))), for shapes too large for
// finite differences: several 64-query tiles, decode offsets, wide GQA groups.
void attention_backward_ref(const Cfg& c, const Vec& q, const Vec& k, const Vec& v, const Vec& dout, Vec& dq, Vec& dk,
                            Vec& dv) {
  Vec lse;
  Vec out = attention_ref(c, q, k, v, &lse);
  dq.assign(q.size(), 0);
  dk.assign(k.size(), 0);
  dv.assign(v.size(), 0);
  const double sc = c.eff_scale();
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.hq; ++h)
      for (int64_t i = 0; i < c.tq; ++i) {
        int64_t g = h / (c.hq / c.hkv), last = c.causal ? c.tk - c.tq + i : c.tk - 1;
        auto qi = [&](int64_t e) { return q[((b * c.tq + i) * c.hq + h) * c.d + e]; };
        auto doi = [&](int64_t e) { return dout[((b * c.tq + i) * c.hq + h) * c.d + e]; };
        double di = 0;
        for (int64_t e = 0; e < c.d; ++e) di += doi(e) * out[((b * c.tq + i) * c.hq + h) * c.d + e];
        for (int64_t j = 0; j <= last; ++j) {
          int64_t kj = ((b * c.tk + j) * c.hkv + g) * c.d;
          double s = 0, dp = 0;
          for (int64_t e = 0; e < c.d; ++e) {
            s += qi(e) * k[kj + e];
            dp += doi(e) * v[kj + e];
          }
          double p = std::exp(s * sc - lse[(b * c.hq + h) * c.tq + i]);
          double ds = p * (dp - di) * sc;
          for (int64_t e = 0; e < c.d; ++e) {
            dv[kj + e] += p * doi(e);
            dq[((b * c.tq + i) * c.hq + h) * c.d + e] += ds * k[kj + e];
            dk[kj + e] += ds * qi(e);
          }
        }
      }
}

TEST(Attention, ManyTilesAndDecodeOffsetsMatchTheAnalyticReference) {
  // 150 queries span three 64-query tiles; 70 of 200 is a chunked prefill over a cache.
  for (const Cfg& c : {Cfg{1, 150, 150, 4, 1, 16}, Cfg{2, 70, 200, 6, 3, 32}, Cfg{1, 1, 130, 2, 2, 64}}) {
    Result r = run(c, DType::F32, 1.0f, 5);
    Vec lse_ref;
    Vec out_ref = attention_ref(c, test::to_f64(r.q), test::to_f64(r.k), test::to_f64(r.v), &lse_ref);
    test::expect_close(test::to_f64(r.out), out_ref, 1e-5, 1e-4, "out");
    test::expect_close(test::to_f64(r.lse), lse_ref, 1e-5, 1e-5, "lse");
    Vec dq, dk, dv;
    attention_backward_ref(c, test::to_f64(r.q), test::to_f64(r.k), test::to_f64(r.v), test::to_f64(r.dout), dq, dk, dv);
    test::expect_close(test::to_f64(r.dq), dq, 1e-4, 1e-3, "dq");
    test::expect_close(test::to_f64(r.dk), dk, 1e-4, 1e-3, "dk");
    test::expect_close(test::to_f64(r.dv), dv, 1e-4, 1e-3, "dv");
  }
}

}  // namespace
}  // namespace dt
