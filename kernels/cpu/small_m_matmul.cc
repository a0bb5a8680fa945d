// matmul with very few rows (decoding: one token per sequence) as a streaming
// matrix-vector product. A GEMM library packs B before it multiplies; with one to four
// rows of A that packing copies every weight once per token, which is most of the time of
// a decode step. Here each weight is read once, straight from where it is, converted to f32
// in registers when it is bf16 or f16 (so bf16 weights move half the bytes), and multiplied
// into f32 accumulators; the result is rounded once.
// Columns of C go in fixed chunks to the pool; every element is summed over k in the same
// order whatever the thread count, so results never depend on it.
#include "kernels/cpu/small_m_matmul.h"

#include <algorithm>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_ops.h"

namespace dt::kernels::cpu {
namespace {

constexpr int64_t kSmallMMaxRows = 4;  // rows of C handled here; more rows amortize packing
constexpr int64_t kSmallMChunk = 256;  // columns of C per task (accumulators stay in L1)

// B not transposed: B is [k, n]; for each k, C's chunk += A[r, k] * B[k, chunk].
template <class TA, class TB>
void chunk_nn(const TA* a, int64_t m, int64_t k, const TB* b, int64_t n, int64_t n0, int64_t n1, float* acc) {
  const int64_t w = n1 - n0;
  std::fill(acc, acc + m * kSmallMChunk, 0.0f);
  for (int64_t p = 0; p < k; ++p) {
    const TB* row = b + p * n + n0;
    for (int64_t r = 0; r < m; ++r) {
      const float s = to_f32(a[r * k + p]);
      float* out = acc + r * kSmallMChunk;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) out[j] += s * to_f32(row[j]);
    }
  }
}

// B transposed: B is [n, k]; C[r, j] = dot(A[r, :], B[j, :]).
template <class TA, class TB>
void chunk_nt(const TA* a, int64_t m, int64_t k, const TB* b, int64_t n0, int64_t n1, float* acc) {
  for (int64_t j = n0; j < n1; ++j) {
    const TB* row = b + j * k;
    for (int64_t r = 0; r < m; ++r) {
      const TA* x = a + r * k;
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int64_t p = 0; p < k; ++p) s += to_f32(x[p]) * to_f32(row[p]);
      acc[r * kSmallMChunk + (j - n0)] = s;
    }
  }
}

template <class T>
void small_m_run(const Tensor& a, const Tensor& b, Tensor& c, bool trans_b, float alpha, float beta) {
  const int64_t k = a.dim(-1), n = c.dim(-1), m = c.numel() / n;
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  T* cp = c.data<T>();
  const int64_t chunks = (n + kSmallMChunk - 1) / kSmallMChunk;
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    float acc[kSmallMMaxRows * kSmallMChunk];
    for (int64_t ci = c0; ci < c1; ++ci) {
      const int64_t n0 = ci * kSmallMChunk, n1 = std::min(n, n0 + kSmallMChunk);
      if (trans_b) chunk_nt(ap, m, k, bp, n0, n1, acc);
      else chunk_nn(ap, m, k, bp, n, n0, n1, acc);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = n0; j < n1; ++j) {
          float v = alpha * acc[r * kSmallMChunk + (j - n0)];
          if (beta != 0.0f) v += beta * to_f32(cp[r * n + j]);
          cp[r * n + j] = from_f32<T>(v);
        }
    }
  });
}

}  // namespace

bool small_m_matmul(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha, float beta) {
  // A shared 2-D B lets the batch fold into rows: A is then [rows, k] whatever its batch dims.
  if (trans_a || b.ndim() != 2 || c.numel() == 0 || c.numel() / c.dim(-1) > kSmallMMaxRows) return false;
  dispatch_float(a.dtype(), [&](auto tag) { small_m_run<decltype(tag)>(a, b, c, trans_b, alpha, beta); });
  return true;
}

}  // namespace dt::kernels::cpu
