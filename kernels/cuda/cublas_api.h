// cuBLAS, loaded on first use (core/shared_library.h says why it is not linked). The entry
// points libdtrain calls are listed once, in DT_CUBLAS_ENTRY_POINTS; each becomes a member of
// CublasApi with the header's own type, so a call reads `cublas().cublasCreate(&h)` and the
// compiler checks it against cublas_v2.h. (cublas_v2.h maps some names to their _v2
// symbols, cublasCreate to cublasCreate_v2; the member and the symbol looked up follow it.)
//
// Where it is looked for: DTRAIN_CUBLAS_LIBRARY (a path) when set, else libcublas.so.<the
// major version built against> as the dynamic loader finds it, else in the CUDA toolkit's
// library folder the build used.
#pragma once
#include <cublas_v2.h>

namespace dt::kernels::cuda {

// The C entry point of the strided batched GEMM, spelled out: C++ sees a second, inline
// overload (a cudaDataType compute type), so its address alone names no one function.
using CublasGemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                                      int, const void*, const void*, cudaDataType, int, long long,
                                                      const void*, cudaDataType, int, long long, const void*, void*,
                                                      cudaDataType, int, long long, int, cublasComputeType_t,
                                                      cublasGemmAlgo_t);

// X(name, type): every entry point libdtrain calls, with its pointer type.
#define DT_CUBLAS_ENTRY_POINTS(X)                        \
  X(cublasCreate, decltype(&::cublasCreate))             \
  X(cublasDestroy, decltype(&::cublasDestroy))           \
  X(cublasSetStream, decltype(&::cublasSetStream))       \
  X(cublasSetMathMode, decltype(&::cublasSetMathMode))   \
  X(cublasGetStatusString, decltype(&::cublasGetStatusString)) \
  X(cublasGemmStridedBatchedEx, CublasGemmStridedBatchedEx)

struct CublasApi {
#define DT_CUBLAS_MEMBER(name, type) type name = nullptr;
  DT_CUBLAS_ENTRY_POINTS(DT_CUBLAS_MEMBER)
#undef DT_CUBLAS_MEMBER
};

// The loaded table. Throws dt::Error UNSUPPORTED, naming every place tried and the
// variable that points elsewhere, when cuBLAS cannot be loaded or lacks an entry point.
// Thread-safe; loads once per process.
const CublasApi& cublas();

}  // namespace dt::kernels::cuda
