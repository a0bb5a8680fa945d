// Ring attention (nn/ring_attention.h) on the local backend against single-rank causal
// attention over the whole sequence: cp 2 and 4, grouped-query heads, f32 and bf16. Each
// rank holds chunks r and 2 cp - 1 - r; its output rows, log-sum-exps and dQ, dK, dV rows
// must be those of the whole sequence's at its positions (f32: 2e-5; bf16 inputs, computed
// in f32 on both sides: 2e-2). Also the zig-zag positions, and the refusals by name.
#include <cmath>

#include "kernels/ops.h"
#include "multirank/coll_util.h"
#include "nn/ring_attention.h"
#include "unit/test_util.h"

namespace dt {
namespace {

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
