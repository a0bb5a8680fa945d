// The GEMM backend the CPU kernels call: oneDNN, OpenBLAS or BLIS, chosen at configure time
// (DTRAIN_BLAS; docs/dependencies.md gives the measurements behind the default). One source
// file per backend in kernels/cpu/blas/. Always called single-threaded: the kernels split
// the work over their own blocking pool instead, in blocks that never depend on the thread
// count, so results are bitwise the same at any thread count.
#pragma once
#include <cstdint>

namespace dt::kernels::cpu {

// Row-major C[m,n] = alpha * op(A) op(B) + beta * C with leading dimensions lda, ldb, ldc.
// Thread safety: may be called from many threads at once.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Whether gemm_bf16 runs natively: bf16 x bf16 products accumulated in f32 on the CPU's
// bf16 dot-product instructions (AVX512-BF16), at about twice the f32 rate. False when the
// backend has no such kernel or the CPU lacks the instructions (checked once, at run time);
// callers then widen to f32 and call sgemm. Opt-in for now (DTRAIN_CPU_BF16_GEMM=1): on the
// blocked calls the kernels make, oneDNN 2.6's bf16 matmul repacks B on every call and runs
// slower than widening (docs/performance.md has the figures).
bool gemm_bf16_native();

// As sgemm, with A and B as bf16 bit patterns and C in f32. Only when gemm_bf16_native().
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
               int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc);

const char* blas_name();

}  // namespace dt::kernels::cpu
