#include <limits>

#include "kernels/ops.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

using Vec = std::vector<double>;

// out[r, :] = table[ids[r], :], in double.
Vec embedding_ref(const std::vector<int32_t>& ids, const Vec& table, int64_t c) {
  Vec out;
  for (int32_t id : ids) out.insert(out.end(), table.begin() + id * c, table.begin() + (id + 1) * c);
  return out;
}

// n ids in [0, v), repeats included, from a fixed LCG.
std::vector<int32_t> random_ids(int64_t n, int32_t v, uint32_t seed) {
  std::vector<int32_t> ids(n);
  for (auto& id : ids) {
    seed = seed * 1664525u + 1013904223u;
    id = static_cast<int32_t>((seed >> 8) % static_cast<uint32_t>(v));
  }
  return ids;
}

// Forward into a copy of `out` and backward into a copy of `table` give the same bits with
// one kernel thread and with two.
void expect_same_bits_on_one_and_two_threads(const Tensor& ids, const Tensor& table, const Tensor& dout,
                                             const Tensor& out) {
  auto run = [&] {
    std::vector<Tensor> r = {test::converted(out, out.dtype()), test::converted(table, table.dtype())};
    kernels::embedding_forward(ids, table, r[0]);
    kernels::embedding_backward(ids, dout, r[1]);
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
  EXPECT_TRUE(test::same_bits(one[0], two[0])) << "out";
  EXPECT_TRUE(test::same_bits(one[1], two[1])) << "dtable";
}

TEST(Embedding, ForwardCopiesRowsExactly) {
  std::vector<int32_t> idv = {3, 0, 9, 3, 3, 7};
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    Tensor ids = test::from_ints(idv, {2, 3}), table = test::randn({10, 6}, t, 1, "table");
    Tensor out = Tensor::zeros({2, 3, 6}, t);
    kernels::embedding_forward(ids, table, out);
    test::expect_close(test::to_f64(out), embedding_ref(idv, test::to_f64(table), 6), 0, 0, dtype_name(t));
  }
}

TEST(Embedding, BackwardMatchesFiniteDifferencesAndAccumulates) {
  std::vector<int32_t> idv = {4, 1, 4, 8, 0, 4, 1};
  Tensor ids = test::from_ints(idv, {7}), table = test::randn({10, 5}, DType::F32, 2, "table");
  Tensor dout = test::randn({7, 5}, DType::F32, 2, "dout"), dtable = Tensor::zeros({10, 5}, DType::F32);
  kernels::embedding_backward(ids, dout, dtable);
  Vec doutv = test::to_f64(dout);
  auto loss = [&](const Vec& tv) { return test::dot(embedding_ref(idv, tv, 5), doutv); };
  Vec want = test::finite_diff(loss, test::to_f64(table));
  // Sums of up to three f32 values against a double derivative of a linear function.
  test::expect_close(test::to_f64(dtable), want, 1e-6, 1e-6, "dtable");
  Vec twice = test::to_f64(dtable);
  for (auto& v : twice) v *= 2;
  kernels::embedding_backward(ids, dout, dtable);
  test::expect_close(test::to_f64(dtable), twice, 0, 0, "dtable after two calls");  // doubling is exact
}

TEST(Embedding, Bf16AndF16CloseToF32) {
  std::vector<int32_t> idv = random_ids(64, 12, 3);
  Tensor ids = test::from_ints(idv, {64});
  for (DType t : {DType::BF16, DType::F16}) {
    Tensor dout = test::randn({64, 16}, t, 3, "dout"), dtable = test::randn({12, 16}, t, 3, "dtable");
    Tensor doutf = test::converted(dout, DType::F32), dtablef = test::converted(dtable, DType::F32);
    kernels::embedding_backward(ids, dout, dtable);
    kernels::embedding_backward(ids, doutf, dtablef);
    // Each row is summed in f32 and rounded into dtable once: one rounding (2^-8, 2^-11) of
    // sums of ~5 unit normals.
    double tol = t == DType::BF16 ? 2e-2 : 3e-3;
    test::expect_close(test::to_f64(dtable), test::to_f64(dtablef), tol, tol, dtype_name(t));
  }
}

TEST(Embedding, BitwiseSameWithOneAndTwoThreads) {
  // 2000 ids over 50 rows: two forward tasks and two gradient tasks with two threads, and many
  // repeats per row, where summation order would show in bf16.
  Tensor ids = test::from_ints(random_ids(2000, 50, 4), {2000});
  Tensor table = test::randn({50, 64}, DType::BF16, 4, "table"), dout = test::randn({2000, 64}, DType::BF16, 4, "d");
  expect_same_bits_on_one_and_two_threads(ids, table, dout, Tensor::zeros({2000, 64}, DType::BF16));
}

TEST(Embedding, OutOfRangeIdIsRejectedBeforeAnyWrite) {
  Tensor table = test::randn({10, 4}, DType::F32, 5, "table"), dout = test::randn({6, 4}, DType::F32, 5, "dout");
  for (int32_t bad : {12, 10, std::numeric_limits<int32_t>::max()}) {
    Tensor ids = test::from_ints({1, 2, 3, 4, bad, 5}, {6});
    Tensor out = test::randn({6, 4}, DType::F32, 6, "out"), dtable = test::randn({10, 4}, DType::F32, 6, "dt");
    Tensor out0 = test::converted(out, DType::F32), dtable0 = test::converted(dtable, DType::F32);
    std::string what = "ids row 4 holds id " + std::to_string(bad);
    test::expect_invalid([&] { kernels::embedding_forward(ids, table, out); }, what);
    test::expect_invalid([&] { kernels::embedding_backward(ids, dout, dtable); }, what);
    test::expect_invalid([&] { kernels::embedding_forward(ids, table, out); }, "accepted: [0, 10)");
    EXPECT_TRUE(test::same_bits(out, out0));
    EXPECT_TRUE(test::same_bits(dtable, dtable0));
  }
}

// A negative id is "no row" (a vocab-parallel embedding's ids owned by other ranks):
// a zero row forward whatever out held, nothing added to dtable backward.
TEST(Embedding, NegativeIdsGiveZeroRowsAndNoGradient) {
  std::vector<int32_t> idv = {3, -1, 9, -7, 3, std::numeric_limits<int32_t>::min(), 0};
  std::vector<int32_t> kept = {3, 9, 3, 0};  // the rows with an id, in order
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    Tensor ids = test::from_ints(idv, {7}), table = test::randn({10, 6}, t, 7, "table");
    Tensor out = test::randn({7, 6}, t, 7, "out");  // overwritten, padding rows too
    kernels::embedding_forward(ids, table, out);
    Vec got = test::to_f64(out), tab = test::to_f64(table);
    for (int64_t r = 0; r < 7; ++r)
      for (int64_t j = 0; j < 6; ++j)
        EXPECT_EQ(got[r * 6 + j], idv[r] < 0 ? 0.0 : tab[idv[r] * 6 + j]) << dtype_name(t) << " [" << r << ", " << j << "]";
    // Backward equals backward over the rows that have an id, bit for bit.
    Tensor dout = test::randn({7, 6}, t, 8, "dout"), dtable = test::randn({10, 6}, t, 8, "dtable");
    Vec dv = test::to_f64(dout);
    std::vector<float> dkept;
    for (int64_t r = 0; r < 7; ++r)
      if (idv[r] >= 0) dkept.insert(dkept.end(), dv.begin() + r * 6, dv.begin() + (r + 1) * 6);
    Tensor want = test::converted(dtable, t);
    kernels::embedding_backward(test::from_ints(kept, {4}), test::from_vec(dkept, {4, 6}, t), want);
    kernels::embedding_backward(ids, dout, dtable);
    EXPECT_TRUE(test::same_bits(dtable, want)) << dtype_name(t) << " dtable";
  }
}

TEST(Embedding, AllIdsNegativeWritesZerosAndAddsNothing) {
  Tensor ids = test::from_ints({-1, -2, -1}, {3}), table = test::randn({4, 5}, DType::F32, 9, "table");
  Tensor out = test::randn({3, 5}, DType::F32, 9, "out"), dtable = test::randn({4, 5}, DType::F32, 9, "dt");
  Tensor dtable0 = test::converted(dtable, DType::F32);
  kernels::embedding_forward(ids, table, out);
  for (double v : test::to_f64(out)) EXPECT_EQ(v, 0.0);
  kernels::embedding_backward(ids, test::randn({3, 5}, DType::F32, 9, "dout"), dtable);
  EXPECT_TRUE(test::same_bits(dtable, dtable0));
}

TEST(Embedding, NegativeIdsBitwiseSameWithOneAndTwoThreads) {
  std::vector<int32_t> idv = random_ids(2000, 60, 10);
  for (auto& id : idv) id = id >= 50 ? -1 : id;  // a sixth of the rows belong to no one here
  Tensor ids = test::from_ints(idv, {2000}), dout = test::randn({2000, 64}, DType::BF16, 10, "d");
  Tensor table = test::randn({50, 64}, DType::BF16, 10, "table");
  expect_same_bits_on_one_and_two_threads(ids, table, dout, test::randn({2000, 64}, DType::BF16, 11, "o"));
}

TEST(Embedding, IdAtOrPastVIsRejectedAmongNegativeIds) {
  Tensor table = test::randn({10, 4}, DType::F32, 12, "table"), dout = test::randn({3, 4}, DType::F32, 12, "dout");
  Tensor ids = test::from_ints({-1, 2, 10}, {3});
  Tensor out = test::randn({3, 4}, DType::F32, 12, "out"), dtable = test::randn({10, 4}, DType::F32, 12, "dt");
  Tensor out0 = test::converted(out, DType::F32), dtable0 = test::converted(dtable, DType::F32);
  const std::string what = "ids row 2 holds id 10, out of range; accepted: [0, 10), the rows of the table, or < 0";
  test::expect_invalid([&] { kernels::embedding_forward(ids, table, out); }, "embedding_forward: " + what);
  test::expect_invalid([&] { kernels::embedding_backward(ids, dout, dtable); }, "embedding_backward: " + what);
  EXPECT_TRUE(test::same_bits(out, out0));  // the zero row of id -1 was not written either
  EXPECT_TRUE(test::same_bits(dtable, dtable0));
}

TEST(Embedding, RejectsBadArguments) {
  Tensor ids = test::from_ints({1, 2, 3}, {3}), idsf = Tensor::zeros({3}, DType::F32), none;
  Tensor table = Tensor::zeros({10, 4}, DType::F32), table1 = Tensor::zeros({40}, DType::F32);
  Tensor out = Tensor::zeros({3, 4}, DType::F32), out5 = Tensor::zeros({3, 5}, DType::F32);
  Tensor outh = Tensor::zeros({3, 4}, DType::F16);
  test::expect_invalid([&] { kernels::embedding_forward(idsf, table, out); }, "ids has dtype f32; required: i32");
  test::expect_invalid([&] { kernels::embedding_forward(ids, table1, out); }, "table has shape [40]");
  test::expect_invalid([&] { kernels::embedding_forward(ids, table, out5); }, "out has shape [3, 5]; required: [3, 4]");
  test::expect_invalid([&] { kernels::embedding_forward(ids, table, outh); }, "out has dtype f16");
  test::expect_invalid([&] { kernels::embedding_forward(none, table, out); }, "ids is an empty tensor");
  test::expect_invalid([&] { kernels::embedding_backward(ids, out5, table); }, "dout has shape [3, 5]");
  test::expect_invalid([&] { kernels::embedding_backward(ids, outh, table); }, "dout has dtype f16");
  test::expect_invalid([&] { kernels::embedding_backward(ids, out, none); }, "dtable is an empty tensor");
}

}  // namespace
}  // namespace dt
