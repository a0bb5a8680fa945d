// Helpers shared by the unit tests: tensors from vectors and back, closeness checks,
// central finite differences in double precision for checking backward kernels, expected
// errors, a scoped kernel thread count and bitwise comparison.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "sanitized.h"

namespace dt::test {

// True in the sanitizer builds (the ASan and TSan passes of tools/test.sh), where the
// heaviest matrices run thinner: every code path, fewer repeats of it in other dtypes and
// sizes (the Release pass runs them in full).
constexpr bool kSanitized = DT_TEST_SANITIZED;

// B random sequences of T + 1 token ids below V keyed by seed: inputs i32 [B, T] are the
// first T of each, targets the last T (next-token prediction).
struct TokenBatch {
  Tensor in, tg;
};
TokenBatch random_token_batch(int64_t B, int64_t T, int64_t V, uint64_t seed);

// A tensor of normal(0, std) values keyed by (seed, name).
Tensor randn(const Shape& shape, DType dtype = DType::F32, uint64_t seed = 1, const std::string& name = "x",
             float std = 1.0f);
Tensor from_vec(const std::vector<float>& v, const Shape& shape, DType dtype = DType::F32);
Tensor from_ints(const std::vector<int32_t>& v, const Shape& shape);
// Values of a floating tensor, widened to double.
std::vector<double> to_f64(const Tensor& t);

// EXPECT that |got - want| <= atol + rtol * |want| elementwise; reports the worst element.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double atol, double rtol,
                  const std::string& what);

// d f / d x by central differences in double precision, with step eps.
std::vector<double> finite_diff(const std::function<double(const std::vector<double>&)>& f,
                                std::vector<double> x, double eps = 1e-6);

// d f / d (*v) by a central difference in double, perturbing the f32 value in place by
// +-eps and dividing by the step f32 actually stored (then restoring *v): for checking a
// model's parameter gradients, where f re-runs the forward.
double central_diff(float* v, float eps, const std::function<double()>& f);

// sum_i a[i] * b[i], the scalar loss used to turn a vector output into a gradient check.
double dot(const std::vector<double>& a, const std::vector<double>& b);

// EXPECT that fn() throws dt::Error with DT_ERR_INVALID_ARGUMENT and a message holding `needle`.
template <class F> void expect_invalid(F&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected INVALID_ARGUMENT mentioning \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DT_ERR_INVALID_ARGUMENT) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "\"" << needle << "\" not in: " << e.what();
  }
}

// Sets the kernel pool's size for a scope, then restores it (even when a test fails).
class KernelThreads {
 public:
  explicit KernelThreads(int threads) : keep_(kernel_threads()) { set_kernel_threads(threads); }
  ~KernelThreads() { set_kernel_threads(keep_); }
  KernelThreads(const KernelThreads&) = delete;
  KernelThreads& operator=(const KernelThreads&) = delete;

 private:
  int keep_;
};

// A copy of t in dtype `dtype` (rounded when narrower).
inline Tensor converted(const Tensor& t, DType dtype) {
  Tensor out = Tensor::zeros(t.shape(), dtype);
  kernels::cast(t, out);
  return out;
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

}  // namespace dt::test
