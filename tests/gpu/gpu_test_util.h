// Helpers for the GPU tests: the skip when there is no usable GPU, copies to and from
// cuda:0, and per-dtype tolerances for comparing a CUDA op with its CPU twin (math is f32
// on both; only the order of accumulation differs, and bf16/f16 round the outputs).
#pragma once
#include <gtest/gtest.h>

#include "core/gpu_runtime.h"
#include "core/tensor_copy.h"
#include "unit/test_util.h"

namespace dt::test {

#define DT_REQUIRE_GPU()                                                                              \
  do {                                                                                                \
    if (::dt::gpu::device_count() < 1) GTEST_SKIP() << "no usable GPU: " << ::dt::gpu::availability_note(); \
  } while (0)

inline Device gpu0() { return Device{DeviceType::CUDA, 0}; }
inline Tensor on_gpu(const Tensor& t) { return to_device(t, gpu0()); }
inline Tensor on_cpu(const Tensor& t) { return to_device(t, Device::cpu()); }
// Zeros like t (shape and dtype) on the GPU.
inline Tensor gpu_zeros_like(const Tensor& t) { return Tensor::zeros(t.shape(), t.dtype(), gpu0()); }

struct Tol {
  double atol, rtol;
};
inline Tol tol_for(DType t) {
  if (t == DType::BF16) return {2e-2, 2e-2};
  if (t == DType::F16) return {4e-3, 4e-3};
  return {2e-5, 2e-4};
}

// EXPECT the GPU tensor to match the CPU one within the tolerance of `dtype`, scaled by `k`.
inline void expect_matches(const Tensor& gpu_out, const Tensor& cpu_out, DType dtype, const std::string& what,
                           double k = 1.0) {
  Tol t = tol_for(dtype);
  expect_close(to_f64(on_cpu(gpu_out)), to_f64(cpu_out), t.atol * k, t.rtol * k, what);
}

}  // namespace dt::test
