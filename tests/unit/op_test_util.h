// Helpers for the op tests: expecting INVALID_ARGUMENT errors, running with a given kernel
// thread count, and bitwise comparison of tensors.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "core/error.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace dt::test {

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
