// reduce (the collectives' combine step) against a reference that folds in source order in
// f32 (int64 for integers) and rounds once: results must match bitwise.
#include <cmath>
#include <cstring>
#include <random>

#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

using kernels::ReduceOp;
const ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod};

template <class T> constexpr bool kInt = std::is_integral_v<T>;
template <class T> using Acc = std::conditional_t<kInt<T>, int64_t, float>;
template <class T> Acc<T> ld(T x) {
  if constexpr (kInt<T>) return x;
  else return to_f32(x);
}
template <class T> T st(Acc<T> x) {
  if constexpr (kInt<T>) return static_cast<T>(x);
  else return from_f32<T>(x);
}

template <class T> Acc<T> ref_op(ReduceOp op, Acc<T> a, Acc<T> b) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return a + b;
    case ReduceOp::Prod: return a * b;
    case ReduceOp::Max: return std::isnan(static_cast<double>(a)) || a > b ? a : b;
    case ReduceOp::Min: return std::isnan(static_cast<double>(a)) || a < b ? a : b;
  }
  return a;
}

template <class T> std::vector<std::vector<T>> sources(int nsrc, int64_t count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_int_distribution<int> ints(-1000, 1000);
  std::vector<std::vector<T>> s(nsrc, std::vector<T>(count));
  for (auto& v : s)
    for (auto& x : v) x = kInt<T> ? st<T>(ints(gen)) : st<T>(normal(gen));
  return s;
}

template <class T> std::vector<T> reference(ReduceOp op, const std::vector<std::vector<T>>& s) {
  std::vector<T> out(s[0].size());
  for (size_t i = 0; i < out.size(); ++i) {
    Acc<T> acc = ld(s[0][i]);
    for (size_t k = 1; k < s.size(); ++k) acc = ref_op<T>(op, acc, ld(s[k][i]));
    if (op == ReduceOp::Avg) acc = acc / static_cast<Acc<T>>(s.size());
    out[i] = st<T>(acc);
  }
  return out;
}

template <class T> void run(ReduceOp op, DType dtype, const std::vector<std::vector<T>>& s, T* dst) {
  std::vector<const void*> ptrs;
  for (auto& v : s) ptrs.push_back(v.data());
  kernels::reduce(op, dtype, Device::cpu(), ptrs.data(), static_cast<int>(s.size()), dst,
                  static_cast<int64_t>(s[0].size()));
}

template <class T> void check_all_ops(DType dtype) {
  for (ReduceOp op : kOps) {
    std::string what = std::string(dtype_name(dtype)) + " " + kernels::reduce_op_name(op);
    auto s = sources<T>(3, 1037, 7);  // 1037: a ragged last tile
    std::vector<T> want = reference(op, s), got(want.size());
    run(op, dtype, s, got.data());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(T)), 0) << what;
    run(op, dtype, s, s[0].data());  // dst aliases srcs[0]
    EXPECT_EQ(std::memcmp(s[0].data(), want.data(), want.size() * sizeof(T)), 0) << what << " aliased";
    auto one = sources<T>(1, 100, 8);  // a single source is a copy
    std::vector<T> copy(100);
    run(op, dtype, one, copy.data());
    EXPECT_EQ(std::memcmp(copy.data(), one[0].data(), 100 * sizeof(T)), 0) << what << " nsrc 1";
  }
}

TEST(Reduce, EveryOpAndDtypeMatchesReferenceBitwise) {
  check_all_ops<float>(DType::F32);
  check_all_ops<bf16>(DType::BF16);
  check_all_ops<f16>(DType::F16);
  check_all_ops<int32_t>(DType::I32);
  check_all_ops<int64_t>(DType::I64);
}

// 600 x bf16(1/256) = 2.34375 exactly. Rounding to bf16 after each step would stall at 2,
// where 1/256 is below half the spacing (1/64).
TEST(Reduce, Bf16RoundsOnce) {
  std::vector<std::vector<bf16>> s(600, std::vector<bf16>(5, from_f32<bf16>(1.0f / 256)));
  std::vector<bf16> out(5);
  run(ReduceOp::Sum, DType::BF16, s, out.data());
  for (bf16 x : out) EXPECT_EQ(to_f32(x), 2.34375f);
}

TEST(Reduce, IntegerAvgTruncatesAndI64IsExact) {
  std::vector<std::vector<int32_t>> s = {{7, -7, 5}, {0, 0, 0}, {0, 0, 1}};
  std::vector<int32_t> out(3);
  run(ReduceOp::Avg, DType::I32, s, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{2, -2, 2}));
  // Beyond 2^53, where f64 would lose the low bits.
  std::vector<std::vector<int64_t>> big = {{(int64_t(1) << 60) + 1}, {3}};
  std::vector<int64_t> sum(1);
  run(ReduceOp::Sum, DType::I64, big, sum.data());
  EXPECT_EQ(sum[0], (int64_t(1) << 60) + 4);
}

TEST(Reduce, NanPropagatesThroughMaxAndMin) {
  std::vector<std::vector<float>> s = {{NAN, 1.0f, 2.0f}, {0.0f, NAN, 3.0f}, {5.0f, 5.0f, NAN}};
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
    std::vector<float> out(3);
    run(op, DType::F32, s, out.data());
    for (float x : out) EXPECT_TRUE(std::isnan(x)) << kernels::reduce_op_name(op);
  }
}

// 200000 elements spread over two chunks (a chunk is at least 64K elements).
TEST(Reduce, BitwiseIdenticalForOneAndTwoThreads) {
  int keep = kernel_threads();
  auto s = sources<float>(4, 200000, 9);
  std::vector<float> out[2] = {std::vector<float>(200000), std::vector<float>(200000)};
  for (int t = 0; t < 2; ++t) {
    set_kernel_threads(t + 1);
    run(ReduceOp::Avg, DType::F32, s, out[t].data());
  }
  set_kernel_threads(keep);
  EXPECT_EQ(out[0], out[1]);
}

void expect_error(dt_status code, const std::function<void()>& fn, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "expected an error naming: " << fragment;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Reduce, RejectsBadArguments) {
  float a[2] = {1, 2}, b[2] = {3, 4}, out[2];
  const void* srcs[2] = {a, b};
  const void* with_null[2] = {a, nullptr};
  auto call = [&](ReduceOp op, DType dt, Device dev, const void* const* s, int n, void* d, int64_t count) {
    return [=] { kernels::reduce(op, dt, dev, s, n, d, count); };
  };
  auto cpu = Device::cpu();
  const int32_t inv = DT_ERR_INVALID_ARGUMENT;
  expect_error(inv, call(ReduceOp::Sum, DType::F32, cpu, srcs, 0, out, 2), "reduce: nsrc is 0; accepted: >= 1");
  expect_error(inv, call(ReduceOp::Sum, DType::F32, cpu, srcs, 2, out, -1), "reduce: count is -1");
  expect_error(inv, call(ReduceOp::Sum, DType::F32, cpu, with_null, 2, out, 2), "reduce: srcs[1] is null");
  expect_error(inv, call(ReduceOp::Sum, DType::F32, cpu, srcs, 2, nullptr, 2), "reduce: dst is null");
  expect_error(inv, call(ReduceOp::Sum, DType::F32, cpu, nullptr, 2, out, 2), "reduce: srcs is null");
  expect_error(inv, call(ReduceOp::Sum, static_cast<DType>(9), cpu, srcs, 2, out, 2), "reduce: dtype: unknown");
  expect_error(inv, call(static_cast<ReduceOp>(7), DType::F32, cpu, srcs, 2, out, 2), "reduce: op is 7");
  Device gpu{DeviceType::CUDA, 0};
  expect_error(DT_ERR_UNSUPPORTED, call(ReduceOp::Sum, DType::F32, gpu, srcs, 2, out, 2), "cuda");
  kernels::reduce(ReduceOp::Sum, DType::F32, cpu, with_null, 2, nullptr, 0);  // nothing to touch: fine
}

}  // namespace
}  // namespace dt
