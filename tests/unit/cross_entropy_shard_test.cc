// The vocab-parallel cross-entropy ops against cross_entropy on the whole logits: the
// logits split into N column shards (the last one padded with garbage), the collectives
// (MAX then SUM over shards) emulated here in rank order, the losses combined as a caller
// would, and each shard's gradient compared with its columns of the whole gradient.
#include <cmath>
#include <limits>

#include "kernels/ops.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

using Vec = std::vector<double>;
using test::expect_invalid;
constexpr int32_t kIgnore = -100;
constexpr int64_t kR = 37, kV = 50;

// Every 5th row (from row 1) ignored; the rest spread over the vocabulary, first and last
// ids included (row 0 holds 49, row 27 holds 0).
std::vector<int32_t> shard_targets() {
  std::vector<int32_t> t(kR);
  for (int64_t r = 0; r < kR; ++r) t[r] = r % 5 == 1 ? kIgnore : static_cast<int32_t>((r * 13 + 49) % kV);
  return t;
}

// Columns [begin, begin + valid) of whole [R, V] as a [R, vs] tensor of whole's dtype;
// columns from `valid` on hold garbage (NaN, Inf, large values) that the ops must not read.
Tensor take_shard(const Tensor& whole, int64_t begin, int64_t valid, int64_t vs) {
  int64_t rows = whole.dim(0), v = whole.dim(1);
  Vec w = test::to_f64(whole);
  const float garbage[3] = {std::numeric_limits<float>::quiet_NaN(), INFINITY, 1e4f};
  std::vector<float> s(rows * vs);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < vs; ++j)
      s[r * vs + j] = j < valid ? static_cast<float>(w[r * v + begin + j]) : garbage[(r + j) % 3];
  return test::from_vec(s, {rows, vs}, whole.dtype());  // values of whole's dtype: exact
}

struct Sharded {
  std::vector<float> loss;
  std::vector<Tensor> dlogits;  // one per shard, [R, vs]
  int64_t vs = 0;
  std::vector<int64_t> begin, valid;
};

// Cross-entropy of `whole` computed as N tensor-parallel ranks would.
Sharded sharded_ce(const Tensor& whole, const std::vector<int32_t>& tv, const Tensor& dlosses, int n) {
  int64_t rows = whole.dim(0), v = whole.dim(1);
  Sharded out;
  out.vs = (v + n - 1) / n;
  std::vector<Tensor> shards;
  for (int k = 0; k < n; ++k) {
    out.begin.push_back(k * out.vs);
    out.valid.push_back(std::min(out.vs, v - k * out.vs));
    shards.push_back(take_shard(whole, out.begin[k], out.valid[k], out.vs));
  }
  Tensor tg = test::from_ints(tv, {rows});
  Tensor row_max = test::from_vec(std::vector<float>(rows, -INFINITY), {rows});
  for (int k = 0; k < n; ++k) {  // all-reduce MAX
    Tensor m = test::from_vec(std::vector<float>(rows, 7.0f), {rows});
    kernels::cross_entropy_shard_max(shards[k], out.valid[k], m);
    for (int64_t r = 0; r < rows; ++r) row_max.data<float>()[r] = std::max(row_max.data<float>()[r], m.data<float>()[r]);
  }
  std::vector<float> sum(rows, 0.0f), z(rows, 0.0f);
  for (int k = 0; k < n; ++k) {  // all-reduce SUM, in rank order and f32 as the collectives do
    Tensor p = test::from_vec(std::vector<float>(rows * 2, 7.0f), {rows, 2});  // overwritten
    kernels::cross_entropy_shard_forward(shards[k], tg, out.begin[k], out.valid[k], kIgnore, row_max, p);
    for (int64_t r = 0; r < rows; ++r) sum[r] += p.data<float>()[2 * r], z[r] += p.data<float>()[2 * r + 1];
  }
  Tensor lse = Tensor::zeros({rows}, DType::F32);
  out.loss.assign(rows, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    if (tv[r] == kIgnore) {
      EXPECT_EQ(sum[r], 0.0f) << "row " << r;
      EXPECT_EQ(z[r], 0.0f) << "row " << r;
      continue;
    }
    lse.data<float>()[r] = std::log(sum[r]) + row_max.data<float>()[r];
    out.loss[r] = lse.data<float>()[r] - z[r];
  }
  for (int k = 0; k < n; ++k) {
    Tensor d = test::from_vec(std::vector<float>(rows * out.vs, 9.0f), {rows, out.vs}, whole.dtype());
    kernels::cross_entropy_shard_backward(shards[k], tg, out.begin[k], out.valid[k], kIgnore, lse, dlosses, d);
    out.dlogits.push_back(d);
  }
  return out;
}

// Shard k's valid columns against the whole gradient's columns; padding exactly 0.
void expect_shard_grads(const Sharded& s, const Tensor& whole_d, double atol, double rtol, const std::string& what) {
  int64_t rows = whole_d.dim(0), v = whole_d.dim(1);
  Vec wd = test::to_f64(whole_d);
  for (size_t k = 0; k < s.dlogits.size(); ++k) {
    Vec got = test::to_f64(s.dlogits[k]), want, got_valid;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < s.vs; ++j) {
        if (j < s.valid[k]) {
          got_valid.push_back(got[r * s.vs + j]);
          want.push_back(wd[r * v + s.begin[k] + j]);
        } else {
          EXPECT_EQ(got[r * s.vs + j], 0.0) << what << " shard " << k << " padding [" << r << ", " << j << "]";
        }
      }
    test::expect_close(got_valid, want, atol, rtol, what + " dlogits of shard " + std::to_string(k));
  }
}

TEST(CrossEntropyShard, F32MatchesWholeLogitsForOneToFourShards) {
  std::vector<int32_t> tv = shard_targets();
  Tensor x = test::randn({kR, kV}, DType::F32, 11, "x", 2.0f), tg = test::from_ints(tv, {kR});
  Tensor dl = test::randn({kR}, DType::F32, 11, "dl");
  Tensor loss = Tensor::zeros({kR}, DType::F32), dx = Tensor::zeros({kR, kV}, DType::F32);
  kernels::cross_entropy_forward(x, tg, kIgnore, loss);
  kernels::cross_entropy_backward(x, tg, dl, kIgnore, dx);
  Vec want = test::to_f64(loss);
  for (int n = 1; n <= 4; ++n) {
    Sharded s = sharded_ce(x, tv, dl, n);
    std::string what = std::to_string(n) + " shards";
    test::expect_close(Vec(s.loss.begin(), s.loss.end()), want, 0.0, 1e-6, what + " losses");
    expect_shard_grads(s, dx, 1e-7, 2e-6, what);
    // One shard is the whole row: the same f32 operations as cross_entropy_backward.
    if (n == 1) {
      EXPECT_TRUE(test::same_bits(s.dlogits[0], dx)) << "one shard: dlogits bitwise";
    }
  }
}

// bf16/f16 logits: against cross_entropy on the same rounded logits, with the tolerances
// of cross_entropy's own half-precision test (loss in f32; dlogits rounded on store).
TEST(CrossEntropyShard, HalfPrecisionMatchesWholeLogits) {
  std::vector<int32_t> tv = shard_targets();
  for (DType t : {DType::BF16, DType::F16}) {
    Tensor x = test::randn({kR, kV}, t, 12, "x", 2.0f), tg = test::from_ints(tv, {kR});
    Tensor dl = test::randn({kR}, DType::F32, 12, "dl");
    Tensor loss = Tensor::zeros({kR}, DType::F32), dx = Tensor::zeros({kR, kV}, t);
    kernels::cross_entropy_forward(x, tg, kIgnore, loss);
    kernels::cross_entropy_backward(x, tg, dl, kIgnore, dx);
    for (int n = 1; n <= 4; ++n) {
      Sharded s = sharded_ce(x, tv, dl, n);
      std::string what = std::string(dtype_name(t)) + ", " + std::to_string(n) + " shards";
      test::expect_close(Vec(s.loss.begin(), s.loss.end()), test::to_f64(loss), 1e-5, 1e-5, what + " losses");
      expect_shard_grads(s, dx, 1e-3, 1e-2, what);
    }
  }
}

// The partial sums themselves, on one hand-made shard: columns 10..12 of a vocabulary
// (valid 3 of Vs 4), targets in, before, after the shard, and ignored.
TEST(CrossEntropyShard, ForwardPartialsOfOneShard) {
  std::vector<float> xv = {1.0f, 2.0f, 3.0f, NAN, -1.0f, 0.5f, 4.0f, INFINITY, 0.25f, 0.0f, 0.0f, 1e4f};
  Tensor x = test::from_vec(xv, {3, 4}), tg = test::from_ints({11, 5, kIgnore}, {3});
  Tensor m = Tensor::zeros({3}, DType::F32), p = test::from_vec(std::vector<float>(6, 7.0f), {3, 2});
  kernels::cross_entropy_shard_max(x, 3, m);
  EXPECT_EQ(test::to_f64(m), (Vec{3.0, 4.0, 0.25}));
  Tensor gm = test::from_vec({5.0f, 4.0f, 0.0f}, {3});  // as if another shard held a larger max in row 0
  kernels::cross_entropy_shard_forward(x, tg, 10, 3, kIgnore, gm, p);
  double s0 = std::exp(-4.0) + std::exp(-3.0) + std::exp(-2.0), s1 = std::exp(-5.0) + std::exp(-3.5) + 1.0;
  test::expect_close(test::to_f64(p), {s0, 2.0, s1, 0.0, 0.0, 0.0}, 0.0, 1e-6, "partial");
  Tensor t2 = test::from_ints({13, 12, 10}, {3});  // 13 is the next shard's first id
  kernels::cross_entropy_shard_forward(x, t2, 10, 3, kIgnore, gm, p);
  EXPECT_EQ(p.data<float>()[1], 0.0f);
  EXPECT_EQ(p.data<float>()[3], 4.0f);
  EXPECT_EQ(p.data<float>()[5], 0.25f);
}

TEST(CrossEntropyShard, BitwiseIdenticalForOneAndTwoThreads) {
  std::vector<int32_t> tv(64);
  for (int i = 0; i < 64; ++i) tv[i] = i % 7 == 3 ? kIgnore : (i * 37) % 900;
  Tensor x = test::randn({64, 300}, DType::BF16, 13, "x"), tg = test::from_ints(tv, {64});
  Tensor dl = test::randn({64}, DType::F32, 13, "dl"), lse = test::randn({64}, DType::F32, 13, "lse");
  auto run = [&] {
    std::vector<Tensor> r = {Tensor::zeros({64}, DType::F32), Tensor::zeros({64, 2}, DType::F32),
                             Tensor::zeros({64, 300}, DType::BF16)};
    kernels::cross_entropy_shard_max(x, 290, r[0]);
    kernels::cross_entropy_shard_forward(x, tg, 300, 290, kIgnore, r[0], r[1]);
    kernels::cross_entropy_shard_backward(x, tg, 300, 290, kIgnore, lse, dl, r[2]);
    return r;
  };
  std::vector<Tensor> one, two;
  {
    test::KernelThreads k(1);
    one = run();
  }
  {
    test::KernelThreads k(2);
    two = run();
  }
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(test::same_bits(one[i], two[i])) << "output " << i;
}

TEST(CrossEntropyShard, NegativeTargetIsRejectedBeforeAnyWrite) {
  Tensor x = test::randn({3, 5}), m = test::from_vec({1, 1, 1}, {3}), dl = test::from_vec({1, 1, 1}, {3});
  Tensor p = test::from_vec(std::vector<float>(6, 7.0f), {3, 2}), dx = Tensor::zeros({3, 5}, DType::F32);
  Tensor bad = test::from_ints({1, -5, 2}, {3});
  expect_invalid([&] { kernels::cross_entropy_shard_forward(x, bad, 0, 5, kIgnore, m, p); },
                 "cross_entropy_shard_forward: targets[1] is -5; accepted: a vocabulary id >= 0 or ignore_index -100");
  for (double v : test::to_f64(p)) EXPECT_EQ(v, 7.0);
  expect_invalid([&] { kernels::cross_entropy_shard_backward(x, bad, 0, 5, kIgnore, m, dl, dx); },
                 "cross_entropy_shard_backward: targets[1] is -5");
  for (double g : test::to_f64(dx)) EXPECT_EQ(g, 0.0);
  // Ids past this shard (another rank's) and a negative ignore_index are fine.
  Tensor ok = test::from_ints({1, -5, 1000000}, {3});
  kernels::cross_entropy_shard_forward(x, ok, 0, 5, -5, m, p);
  EXPECT_EQ(p.data<float>()[2], 0.0f);
  EXPECT_EQ(p.data<float>()[5], 0.0f);
}

TEST(CrossEntropyShard, RejectsBadArguments) {
  Tensor x = test::randn({3, 5}), tg = test::from_ints({0, 1, 2}, {3}), m = Tensor::zeros({3}, DType::F32);
  Tensor p = Tensor::zeros({3, 2}, DType::F32), dl = Tensor::zeros({3}, DType::F32), dx = Tensor::zeros({3, 5}, DType::F32);
  const char* fwd = "cross_entropy_shard_forward: ";
  expect_invalid([&] { kernels::cross_entropy_shard_max(x, 0, m); },
                 "cross_entropy_shard_max: valid is 0; accepted: 1 to Vs = 5");
  expect_invalid([&] { kernels::cross_entropy_shard_forward(x, tg, 0, 6, kIgnore, m, p); },
                 std::string(fwd) + "valid is 6; accepted: 1 to Vs = 5");
  expect_invalid([&] { kernels::cross_entropy_shard_backward(x, tg, 0, -1, kIgnore, m, dl, dx); },
                 "cross_entropy_shard_backward: valid is -1");
  expect_invalid([&] { kernels::cross_entropy_shard_forward(x, tg, -3, 5, kIgnore, m, p); },
                 std::string(fwd) + "vocab_begin is -3; accepted: >= 0");
  Tensor x3 = Tensor::zeros({3, 5, 1}, DType::F32), xi = Tensor::zeros({3, 5}, DType::I32);
  expect_invalid([&] { kernels::cross_entropy_shard_max(x3, 1, m); }, "logits has shape [3, 5, 1]; required: [R, Vs]");
  expect_invalid([&] { kernels::cross_entropy_shard_max(xi, 1, m); }, "logits has dtype i32; accepted: f32, bf16, f16");
  Tensor m16 = Tensor::zeros({3}, DType::BF16), m4 = Tensor::zeros({4}, DType::F32);
  expect_invalid([&] { kernels::cross_entropy_shard_max(x, 5, m16); }, "row_max has dtype bf16; required: f32");
  expect_invalid([&] { kernels::cross_entropy_shard_forward(x, tg, 0, 5, kIgnore, m4, p); },
                 std::string(fwd) + "row_max has shape [4]; required: [3]");
  Tensor p1 = Tensor::zeros({3}, DType::F32), t64 = Tensor::zeros({3}, DType::I64), t2 = test::from_ints({0, 1}, {2});
  expect_invalid([&] { kernels::cross_entropy_shard_forward(x, tg, 0, 5, kIgnore, m, p1); },
                 std::string(fwd) + "partial has shape [3]; required: [3, 2]");
  expect_invalid([&] { kernels::cross_entropy_shard_forward(x, t64, 0, 5, kIgnore, m, p); },
                 std::string(fwd) + "targets has dtype i64; required: i32");
  expect_invalid([&] { kernels::cross_entropy_shard_forward(x, t2, 0, 5, kIgnore, m, p); },
                 std::string(fwd) + "targets has shape [2]; required: [3]");
  const char* bwd = "cross_entropy_shard_backward: ";
  Tensor dx16 = Tensor::zeros({3, 5}, DType::F16), dx4 = Tensor::zeros({3, 4}, DType::F32);
  expect_invalid([&] { kernels::cross_entropy_shard_backward(x, tg, 0, 5, kIgnore, m4, dl, dx); },
                 std::string(bwd) + "lse has shape [4]; required: [3]");
  expect_invalid([&] { kernels::cross_entropy_shard_backward(x, tg, 0, 5, kIgnore, m, m16, dx); },
                 std::string(bwd) + "dlosses has dtype bf16; required: f32");
  expect_invalid([&] { kernels::cross_entropy_shard_backward(x, tg, 0, 5, kIgnore, m, dl, dx16); },
                 std::string(bwd) + "dlogits has dtype f16; required: the dtype of logits, f32");
  expect_invalid([&] { kernels::cross_entropy_shard_backward(x, tg, 0, 5, kIgnore, m, dl, dx4); },
                 std::string(bwd) + "dlogits has shape [3, 4]; required: the shape of logits, [3, 5]");
}

}  // namespace
}  // namespace dt
