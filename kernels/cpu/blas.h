// The GEMM backend the CPU kernels call: oneDNN, OpenBLAS or BLIS, chosen at configure time
// (DTRAIN_BLAS; docs/dependencies.md gives the measurements behind the default). One source
// file per backend in kernels/cpu/blas/. Always called single-threaded: the kernels split
// the work over their own blocking pool instead, in blocks that never depend on the thread
// count, so results are bitwise the same at any thread count.
#pragma once
#include <cstdint>
#include <string>

namespace dt::kernels::cpu {

// Row-major C[m,n] = alpha * op(A) op(B) + beta * C with leading dimensions lda, ldb, ldc.
// Thread safety: may be called from many threads at once.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Whether the backend has a bf16 x bf16 -> f32 GEMM kernel (for the CPUs that have the
// instructions); whether it is used is gemm_path.h's choice.
bool backend_has_bf16_gemm();

// Whether matmul calls gemm_bf16 for bf16 operands: the backend's bf16 kernel was chosen
// (gemm_path.h, once at run time; defined in gemm_path.cc). False also where libdtrain's
// AMX kernel runs them instead. Callers otherwise widen to f32 and call sgemm.
bool gemm_bf16_native();

// As sgemm, with A and B as bf16 bit patterns and C in f32. Only when gemm_bf16_native().
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
               int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc);

const char* blas_name();

// The instruction set the backend's kernels run at on this CPU (e.g. "avx512_core_amx"), or
// what the backend says of it.
std::string blas_kernel_isa();

}  // namespace dt::kernels::cpu
