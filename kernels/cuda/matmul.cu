// matmul on CUDA: cuBLAS GEMM (strided batched), f32 accumulation for every dtype; bf16
// and f16 run on tensor cores. f32 stays true f32 (no TF32), so results track the CPU's
// sgemm to rounding. Row-major C = op(A) op(B) is computed as the column-major
// C^T = op(B)^T op(A)^T, which is the same memory; a 2-D b shared by every batch has
// stride 0. One cuBLAS handle per thread and device, bound to the compute stream.
#include <climits>

#include "kernels/cuda/cublas_api.h"
#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda {
namespace {

constexpr int kMaxDevices = 64;

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    fail(DT_ERR_INTERNAL, std::string("matmul: ") + what + " failed: " + cublas().cublasGetStatusString(s));
}

cublasHandle_t handle_for(Device d) {
  struct Handles {
    cublasHandle_t h[kMaxDevices] = {};
    ~Handles() {
      for (auto x : h)
        if (x) cublas().cublasDestroy(x);
    }
  };
  thread_local Handles handles;
  DT_ASSERT(d.index >= 0 && d.index < kMaxDevices);
  cudaStream_t s = stream_of(d);  // also makes d current
  cublasHandle_t& h = handles.h[d.index];
  if (!h) {
    check_cublas(cublas().cublasCreate(&h), "cublasCreate");
    // No reduced-precision split-K reductions: bf16/f16 GEMMs accumulate in f32 throughout.
    check_cublas(cublas().cublasSetMathMode(h, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                                                CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
                 "cublasSetMathMode");
  }
  check_cublas(cublas().cublasSetStream(h, s), "cublasSetStream");
  return h;
}

cudaDataType_t cuda_type(DType t) {
  return t == DType::F32 ? CUDA_R_32F : (t == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F);
}

int as_int(int64_t v, const char* what) {
  if (v > INT_MAX)
    fail(DT_ERR_UNSUPPORTED, std::string("matmul: ") + what + " = " + std::to_string(v) +
                                 " exceeds cuBLAS's int range on CUDA; split the product");
  return static_cast<int>(v);
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha, float beta) {
  int64_t m = c.dim(-2), n = c.dim(-1), k = trans_a ? a.dim(-2) : a.dim(-1);
  int64_t batch = c.numel() / (m * n);
  bool shared_b = b.ndim() == 2;
  // A 2-D b with an untransposed a is one tall GEMM: fold the batch into M.
  if (shared_b && !trans_a) {
    m *= batch;
    batch = 1;
  }
  cublasHandle_t h = handle_for(c.device());
  cudaDataType_t t = cuda_type(c.dtype());
  int lda = as_int(trans_a ? m : k, "lda"), ldb = as_int(trans_b ? k : n, "ldb"), ldc = as_int(n, "n");
  long long stride_a = static_cast<long long>(c.dim(-2)) * k, stride_b = shared_b ? 0 : static_cast<long long>(k) * n;
  long long stride_c = static_cast<long long>(c.dim(-2)) * n;
  check_cublas(cublas().cublasGemmStridedBatchedEx(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                          as_int(n, "n"), as_int(m, "m"), as_int(k, "k"), &alpha, b.raw(), t, ldb,
                                          stride_b, a.raw(), t, lda, stride_a, &beta, c.raw(), t, ldc, stride_c,
                                          as_int(batch, "batch"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
}

}  // namespace dt::kernels::cuda
