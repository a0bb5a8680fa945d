// The CBLAS backends (OpenBLAS, BLIS): f32 only; bf16 operands are widened by the callers.
#include "kernels/cpu/blas.h"

#include <cblas.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "core/error.h"

#if defined(DTRAIN_BLAS_OPENBLAS)
extern "C" void openblas_set_num_threads(int);
#elif defined(DTRAIN_BLAS_BLIS)
extern "C" void bli_thread_set_num_threads(int64_t);
#endif

namespace dt::kernels::cpu {

static void single_threaded_once() {
  static std::once_flag once;
  std::call_once(once, [] {
#if defined(DTRAIN_BLAS_OPENBLAS)
    openblas_set_num_threads(1);
#elif defined(DTRAIN_BLAS_BLIS)
    bli_thread_set_num_threads(1);
#endif
  });
}

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  single_threaded_once();
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda),
              b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

bool backend_has_bf16_gemm() { return false; }

void gemm_bf16(bool, bool, int64_t, int64_t, int64_t, float, const uint16_t*, int64_t, const uint16_t*, int64_t, float,
               float*, int64_t) {
  fail(DT_ERR_INTERNAL, "gemm_bf16: the " + std::string(blas_name()) + " backend has no bf16 GEMM");
}

std::string blas_kernel_isa() {
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  return core ? std::string("OPENBLAS_CORETYPE=") + core : std::string("its own detection");
}

const char* blas_name() {
#if defined(DTRAIN_BLAS_OPENBLAS)
  return "openblas";
#else
  return "blis";
#endif
}

}  // namespace dt::kernels::cpu
