// The BLAS the CPU kernels call: OpenBLAS or BLIS, chosen at configure time
// (docs/dependencies.md says why OpenBLAS is the default). Always called single-threaded:
// the kernels split work over their own blocking pool instead.
#pragma once
#include <cstdint>

namespace dt::kernels::cpu {

// Row-major C[m,n] = alpha * op(A) op(B) + beta * C with leading dimensions lda, ldb, ldc.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

const char* blas_name();

}  // namespace dt::kernels::cpu
