// Attention over a paged KV cache (serving): every query's output is bitwise that of the
// contiguous attention_forward over the same keys (f32 and bf16), whatever the block
// placement and whatever else is packed into the step (a decode token, a long chunk that
// crosses query tiles, a whole prompt); kv_cache_write puts rows at their slots; bad tables
// and packings are refused by name.
#include <algorithm>
#include <numeric>
#include <random>

#include "kernels/ops.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

constexpr int64_t kHq = 4, kHkv = 2, kD = 16, kBs = 8, kBlocks = 64;

struct Seq {
  int64_t len, n;  // context after the step, queries in the step
};

// Each sequence's keys and values [len, Hkv, D], its queries [n, Hq, D], scattered into
// blocks of a shuffled table; returns (paged out, contiguous out) for all queries packed.
std::pair<std::vector<double>, std::vector<double>> run(const std::vector<Seq>& seqs, DType dt) {
  std::mt19937 rng(5);
  std::vector<int32_t> perm(kBlocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  Tensor kc = Tensor::zeros({kBlocks, kBs, kHkv, kD}, dt), vc = Tensor::zeros({kBlocks, kBs, kHkv, kD}, dt);
  int64_t N = 0, max_blocks = 0;
  for (const Seq& s : seqs) N += s.n, max_blocks = std::max(max_blocks, (s.len + kBs - 1) / kBs);
  Tensor q = test::randn({N, kHq, kD}, dt, 9), out = Tensor::zeros({N, kHq, kD}, dt), want = Tensor::zeros({N, kHq, kD}, dt);
  Tensor info = Tensor::zeros({static_cast<int64_t>(seqs.size()), 3}, DType::I32);
  Tensor tables = Tensor::zeros({static_cast<int64_t>(seqs.size()), max_blocks}, DType::I32);
  int64_t row = 0, next_block = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Seq& s = seqs[i];
    Tensor k = test::randn({1, s.len, kHkv, kD}, dt, 20 + i), v = test::randn({1, s.len, kHkv, kD}, dt, 40 + i);
    std::vector<int32_t> slots;
    for (int64_t b = 0; b < (s.len + kBs - 1) / kBs; ++b) tables.data<int32_t>()[i * max_blocks + b] = perm[next_block++];
    for (int64_t p = 0; p < s.len; ++p) slots.push_back(tables.data<int32_t>()[i * max_blocks + p / kBs] * kBs + p % kBs);
    kernels::kv_cache_write(k.reshape({s.len, kHkv, kD}), v.reshape({s.len, kHkv, kD}),
                            test::from_ints(slots, {s.len}), kc, vc);
    info.data<int32_t>()[3 * i] = static_cast<int32_t>(row);
    info.data<int32_t>()[3 * i + 1] = static_cast<int32_t>(s.n);
    info.data<int32_t>()[3 * i + 2] = static_cast<int32_t>(s.len);
    Tensor qi = q.slice0(row, row + s.n).reshape({1, s.n, kHq, kD});
    Tensor oi = want.slice0(row, row + s.n).reshape({1, s.n, kHq, kD});
    Tensor lse = Tensor::zeros({1, kHq, s.n}, DType::F32);
    kernels::attention_forward(qi, k, v, 0.0f, oi, lse);
    row += s.n;
  }
  kernels::paged_attention_forward(q, kc, vc, info, tables, 0.0f, out);
  return {test::to_f64(out), test::to_f64(want)};
}

TEST(PagedAttention, BitwiseTheContiguousKernelsOutput) {
  // A decode token over 150 keys, a 70-query chunk that crosses a query tile, a whole
  // 9-token prompt, and a chunk that starts mid-block.
  const std::vector<Seq> seqs = {{150, 1}, {100, 70}, {9, 9}, {37, 5}};
  for (DType dt : {DType::F32, DType::BF16}) {
    const auto [got, want] = run(seqs, dt);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << dtype_name(dt) << " element " << i;
  }
}

TEST(PagedAttention, KvCacheWritePlacesRowsAtTheirSlots) {
  Tensor kc = Tensor::zeros({4, 2, 1, 3}, DType::F32), vc = Tensor::zeros({4, 2, 1, 3}, DType::F32);
  Tensor k = test::from_vec({1, 2, 3, 4, 5, 6}, {2, 1, 3}), v = test::from_vec({7, 8, 9, 10, 11, 12}, {2, 1, 3});
  kernels::kv_cache_write(k, v, test::from_ints({5, 0}, {2}), kc, vc);
  const std::vector<double> kk = test::to_f64(kc), vv = test::to_f64(vc);
  EXPECT_EQ(kk[15], 1);  // slot 5 = block 2, offset 1
  EXPECT_EQ(kk[0], 4);
  EXPECT_EQ(vv[17], 9);
  EXPECT_THROW(kernels::kv_cache_write(k, v, test::from_ints({8, 0}, {2}), kc, vc), Error);
}

TEST(PagedAttention, RejectsBadTablesAndPackings) {
  Tensor kc = Tensor::zeros({4, 2, 1, 8}, DType::F32), vc = Tensor::zeros({4, 2, 1, 8}, DType::F32);
  Tensor q = Tensor::zeros({3, 2, 8}, DType::F32), out = Tensor::zeros({3, 2, 8}, DType::F32);
  auto call = [&](std::vector<int32_t> info, std::vector<int32_t> table, int64_t nb) {
    const int64_t S = static_cast<int64_t>(info.size() / 3);
    kernels::paged_attention_forward(q, kc, vc, test::from_ints(info, {S, 3}), test::from_ints(table, {S, nb}), 0.0f,
                                     out);
  };
  EXPECT_NO_THROW(call({0, 3, 4}, {1, 3}, 2));
  test::expect_invalid([&] { call({0, 3, 4}, {1, 4}, 2); }, "tables[0, 1] = 4; accepted: [0, num_blocks = 4)");
  test::expect_invalid([&] { call({0, 3, 5}, {1, 3}, 2); }, "seqs row 0");
  test::expect_invalid([&] { call({0, 2, 2, 1, 2, 2}, {0, 1}, 1); }, "seqs row 1");  // overlap
}

}  // namespace
}  // namespace dt
