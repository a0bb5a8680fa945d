// Tensor parallelism's layers (nn/tensor_parallel.h) against the single-rank layers, on the
// local backend: a column-parallel linear then a row-parallel one (the MLP's and attention's
// pattern) over tp {1, 2, 4}, in f32; outputs, input gradients and every rank's parameter
// gradients equal the single-rank ones to f32 rounding (1e-5 relative: the all-reduce sums
// partial products in another order). Also: a rank starts with exactly its part of the
// single-rank weights; the shard arithmetic on a fused q|k|v weight with unequal segments;
// one all-reduce forward and one backward of the activation's bytes; sizes that do not split
// are named errors.
#include <cmath>

#include "multirank/coll_util.h"
#include "kernels/ops.h"
#include "nn/layers.h"
#include "nn/tensor_parallel.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

constexpr int64_t kIn = 8, kHidden = 16, kOut = 8, kRows = 6;

double max_rel(const Tensor& got, const Tensor& want) {
  std::vector<double> g = test::to_f64(got), w = test::to_f64(want);
  double num = 0, den = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    num = std::max(num, std::fabs(g[i] - w[i]));
    den = std::max(den, std::fabs(w[i]));
  }
  return den > 0 ? num / den : num;
}

TEST(TpShards, TakeAndPlaceRoundTripWithSegments) {
  // A fused [q | k | v] weight of GQA: 8 q rows, 4 k rows, 4 v rows, split over 2 ranks.
  Tensor whole = test::randn({16, 3}, DType::F32, 7);
  nn::ShardSpec spec{0, "tp", {8, 4, 4}};
  Tensor back = Tensor::zeros({16, 3}, DType::F32);
  for (int r = 0; r < 2; ++r) {
    Tensor part = nn::take_shard(whole, spec, r, 2);
    ASSERT_EQ(part.shape(), (Shape{8, 3}));
    // Rank r's rows: q rows [4r, 4r+4), k rows [8+2r, 8+2r+2), v rows [12+2r, 12+2r+2).
    const std::vector<int64_t> rows = {4 * r, 4 * r + 1, 4 * r + 2, 4 * r + 3, 8 + 2 * r, 9 + 2 * r, 12 + 2 * r, 13 + 2 * r};
    for (size_t i = 0; i < rows.size(); ++i)
      for (int c = 0; c < 3; ++c)
        EXPECT_EQ(part.data<float>()[i * 3 + c], whole.data<float>()[rows[i] * 3 + c]) << "rank " << r << " row " << i;
    nn::place_shard(part, spec, r, 2, back);
  }
  EXPECT_TRUE(test::same_bits(back, whole));
  // Columns (row parallel): rank 1 of 2 holds columns [2, 4) of a [3, 4].
  Tensor w2 = test::randn({3, 4}, DType::F32, 8);
  Tensor cols = nn::take_shard(w2, nn::ShardSpec{1, "tp", {}, false}, 1, 2);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 2; ++c) EXPECT_EQ(cols.data<float>()[r * 2 + c], w2.data<float>()[r * 4 + 2 + c]);
  test::expect_invalid([&] { nn::take_shard(whole, nn::ShardSpec{0, "tp", {8, 4, 4}, false}, 0, 3); },
                       "do not split evenly over tp = 3");
  test::expect_invalid([&] { nn::take_shard(whole, nn::ShardSpec{0, "tp", {8, 4}, false}, 0, 2); }, "segments sum to 12");
}

struct Reference {
  Tensor y, dx;
  std::vector<Tensor> grads;  // fc.weight, fc.bias, proj.weight, proj.bias (whole)
  std::vector<Tensor> values;
};

Reference single_rank(const Tensor& x, const Tensor& dy) {
  nn::Linear fc("mlp.fc", kIn, kHidden, true, 3, 0.02f), proj("mlp.proj", kHidden, kOut, true, 3, 0.01f);
  // Non-zero biases, so that their handling (split, or added once after the sum) shows.
  kernels::fill(fc.bias.value, 0.1f);
  kernels::fill(proj.bias.value, -0.2f);
  Reference r;
  Tensor h;
  fc.forward(x, h);
  proj.forward(h, r.y);
  Tensor dh = Tensor::zeros(h.shape(), DType::F32);
  r.dx = Tensor::zeros(x.shape(), DType::F32);
  proj.backward(h, dy, dh);
  fc.backward(x, dh, r.dx);
  for (nn::Linear* l : {&fc, &proj}) {
    r.grads.push_back(l->weight.grad);
    r.grads.push_back(l->bias.grad);
    r.values.push_back(l->weight.value);
    r.values.push_back(l->bias.value);
  }
  return r;
}

TEST(TpLayers, ColumnThenRowMatchSingleRank) {
  Tensor x = test::randn({kRows, kIn}, DType::F32, 11), dy = test::randn({kRows, kOut}, DType::F32, 12);
  const Reference ref = single_rank(x, dy);
  const nn::ShardSpec col{0, "tp", {}}, row{1, "tp", {}}, rep{};
  for (int tp : {1, 2, 4}) {
    auto mesh = comm::test::axes_mesh({1, 1, 1, 1, tp});
    mesh->run([&](int, int rank) {
      comm::Communicator& c = mesh->comm(rank, "tp");
      nn::TpGroup g{&c};
      nn::ColumnParallelLinear fc("mlp.fc", kIn, kHidden, true, 3, 0.02f, DType::F32, g);
      nn::RowParallelLinear proj("mlp.proj", kHidden, kOut, true, 3, 0.01f, DType::F32, g);
      // Each rank starts with exactly its part of the single-rank weights.
      EXPECT_TRUE(test::same_bits(fc.weight.value, nn::take_shard(ref.values[0], col, c.rank(), tp))) << "tp " << tp;
      EXPECT_TRUE(test::same_bits(proj.weight.value, nn::take_shard(ref.values[2], row, c.rank(), tp))) << "tp " << tp;
      kernels::fill(fc.bias.value, 0.1f);
      kernels::fill(proj.bias.value, -0.2f);
      const comm::CollStats ar0 = c.ledger().get(comm::CollKind::AllReduce);
      Tensor h, y;
      fc.forward(x, h);
      proj.forward(h, y);
      Tensor dh = Tensor::zeros(h.shape(), DType::F32), dx = Tensor::zeros(x.shape(), DType::F32);
      proj.backward(h, dy, dh);
      fc.backward(x, dh, dx);
      EXPECT_LT(max_rel(y, ref.y), 1e-5) << "tp " << tp << " rank " << rank;
      EXPECT_LT(max_rel(dx, ref.dx), 1e-5) << "tp " << tp << " rank " << rank;
      const nn::ShardSpec specs[4] = {col, col, row, rep};
      Tensor* grads[4] = {&fc.weight.grad, &fc.bias.grad, &proj.weight.grad, &proj.bias.grad};
      for (int k = 0; k < 4; ++k)
        EXPECT_LT(max_rel(*grads[k], nn::take_shard(ref.grads[static_cast<size_t>(k)], specs[k], c.rank(), tp)), 1e-5)
            << "tp " << tp << " rank " << rank << " grad " << k;
      // One all-reduce forward (y: rows x out) and one backward (dx: rows x in), f32.
      const comm::CollStats ar = c.ledger().get(comm::CollKind::AllReduce);
      if (tp > 1) {
        EXPECT_EQ(ar.calls - ar0.calls, 2);
        EXPECT_EQ(ar.bytes - ar0.bytes, (kRows * kOut + kRows * kIn) * 4);
      }
    });
  }
}

TEST(TpLayers, SizesThatDoNotSplitAreNamed) {
  auto mesh = comm::test::axes_mesh({1, 1, 1, 1, 4});
  mesh->run([&](int, int rank) {
    nn::TpGroup g{&mesh->comm(rank, "tp")};
    test::expect_invalid([&] { nn::ColumnParallelLinear("attn.qkv", 8, 6, true, 1, 0.02f, DType::F32, g); },
                         "attn.qkv.weight: 6 features (dim 0) do not split evenly over tp = 4");
    test::expect_invalid([&] { nn::RowParallelLinear("mlp.proj", 10, 8, true, 1, 0.02f, DType::F32, g); },
                         "mlp.proj.weight: 10 features (dim 1) do not split evenly over tp = 4");
  });
}

}  // namespace
}  // namespace dt
