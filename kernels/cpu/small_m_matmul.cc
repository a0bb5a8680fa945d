// matmul with very few rows (decoding: one token per sequence) as a streaming
// matrix-vector product. A GEMM library packs B before it multiplies; with one to four
// rows of A that packing copies every weight once per token, which is most of the time of
// a decode step. Here each weight is read once, straight from where it is, converted to f32
// in registers when it is bf16 or f16 (so bf16 weights move half the bytes), and multiplied
// into f32 accumulators; the result is rounded once.
// Columns of C go in fixed chunks to the pool; every element is summed over k in the same
// order whatever the thread count, so results never depend on it.
// With B transposed (a linear layer's [out, in] weight: the decode case) and AVX-512, each
// weight row is read once, as part of one sequential stream, against every row of A, into
// two accumulators per row, and each dot product is reduced by a fixed tree: the compiler's
// `omp simd` version ended each dot with 16 dependent scalar adds, which took about as long
// as the dot itself and kept bf16 weights from being read any faster than f32 ones.
#include "kernels/cpu/small_m_matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_features.h"
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

#define DT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
// GCC 12's AVX-512 headers start masked intrinsics from _mm512_undefined_*(), which its
// uninitialized-use warnings flag once inlined (a known false positive, as in amx_gemm.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// 16 elements at p as f32; lanes outside mk read as 0 (and are not touched in memory).
DT_AVX512 inline __m512 load16(const float* p, __mmask16 mk) { return _mm512_maskz_loadu_ps(mk, p); }
DT_AVX512 inline __m512 load16(const bf16* p, __mmask16 mk) {
  const __m256i h = _mm256_maskz_loadu_epi16(mk, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// chunk_nt for M rows of A on AVX-512. Weight rows are read one after another, so the
// weights stay one sequential stream the prefetcher follows (reading four rows side by side
// was a third slower: rows of a few KB are too short for four streams to ramp up). Each
// (row, column) sums its k steps alternately into two accumulators and ends with a fixed
// tree, so a result never depends on M or on the thread count.
template <int M, class T>
DT_AVX512 void chunk_nt_avx512(const T* a, int64_t k, const T* b, int64_t n0, int64_t n1, float* acc) {
  for (int64_t j = n0; j < n1; ++j) {
    const T* w = b + j * k;
    __m512 s0[M], s1[M];
    for (int r = 0; r < M; ++r) s0[r] = s1[r] = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + 32 <= k; p += 32) {
      const __m512 w0 = load16(w + p, 0xFFFF), w1 = load16(w + p + 16, 0xFFFF);
      for (int r = 0; r < M; ++r) {
        s0[r] = _mm512_fmadd_ps(load16(a + r * k + p, 0xFFFF), w0, s0[r]);
        s1[r] = _mm512_fmadd_ps(load16(a + r * k + p + 16, 0xFFFF), w1, s1[r]);
      }
    }
    for (int half = 0; p < k; p += 16, ++half) {  // under 32 left: up to two masked steps
      const __mmask16 mk = k - p >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (k - p)) - 1);
      const __m512 wv = load16(w + p, mk);
      for (int r = 0; r < M; ++r) {
        const __m512 x = load16(a + r * k + p, mk);
        if (half == 0) s0[r] = _mm512_fmadd_ps(x, wv, s0[r]);
        else s1[r] = _mm512_fmadd_ps(x, wv, s1[r]);
      }
    }
    for (int r = 0; r < M; ++r) acc[r * kSmallMChunk + (j - n0)] = _mm512_reduce_add_ps(_mm512_add_ps(s0[r], s1[r]));
  }
}

// The same for bf16 on AVX512-BF16: vdpbf16ps multiplies 32 bf16 pairs straight from memory
// and adds each two neighbours' products into 16 f32 lanes, so no weight is widened first
// (the widening capped bf16 decode at about two thirds of the bytes per second of f32).
#define DT_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
// A function, not a lambda: a lambda does not inherit its enclosing function's target, so on
// a host built without AVX-512 (-march=native on an AVX2 CPU) its intrinsic would not compile.
DT_AVX512_BF16 inline __m512bh load32_bf16(const bf16* q, __mmask32 mk) {
  return (__m512bh)_mm512_maskz_loadu_epi16(mk, q);
}

template <int M>
DT_AVX512_BF16 void chunk_nt_dpbf16(const bf16* a, int64_t k, const bf16* b, int64_t n0, int64_t n1, float* acc) {
  for (int64_t j = n0; j < n1; ++j) {
    const bf16* w = b + j * k;
    __m512 s0[M], s1[M];
    for (int r = 0; r < M; ++r) s0[r] = s1[r] = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + 64 <= k; p += 64) {
      const __m512bh w0 = load32_bf16(w + p, ~__mmask32(0)), w1 = load32_bf16(w + p + 32, ~__mmask32(0));
      for (int r = 0; r < M; ++r) {
        s0[r] = _mm512_dpbf16_ps(s0[r], load32_bf16(a + r * k + p, ~__mmask32(0)), w0);
        s1[r] = _mm512_dpbf16_ps(s1[r], load32_bf16(a + r * k + p + 32, ~__mmask32(0)), w1);
      }
    }
    for (int half = 0; p < k; p += 32, ++half) {  // under 64 left: up to two masked steps
      const __mmask32 mk = k - p >= 32 ? ~__mmask32(0) : __mmask32((1u << (k - p)) - 1);
      const __m512bh wv = load32_bf16(w + p, mk);
      for (int r = 0; r < M; ++r) {
        const __m512bh x = load32_bf16(a + r * k + p, mk);
        if (half == 0) s0[r] = _mm512_dpbf16_ps(s0[r], x, wv);
        else s1[r] = _mm512_dpbf16_ps(s1[r], x, wv);
      }
    }
    for (int r = 0; r < M; ++r) acc[r * kSmallMChunk + (j - n0)] = _mm512_reduce_add_ps(_mm512_add_ps(s0[r], s1[r]));
  }
}

#pragma GCC diagnostic pop
#undef DT_AVX512

// Whether chunk_nt_avx512 serves this storage type on this CPU.
template <class T> bool nt_avx512(int64_t m) {
  return (std::is_same_v<T, float> || std::is_same_v<T, bf16>) && m >= 1 && m <= kSmallMMaxRows &&
         cpu_features().avx512f;
}
// vdpbf16ps for bf16 where the CPU has AVX512-BF16, else the widening AVX-512 kernel.
template <class T> void chunk_nt_fast(const T* a, int64_t m, int64_t k, const T* b, int64_t n0, int64_t n1, float* acc) {
  if constexpr (std::is_same_v<T, bf16>) {
    if (cpu_features().avx512_bf16) {
      switch (m) {
        case 1: return chunk_nt_dpbf16<1>(a, k, b, n0, n1, acc);
        case 2: return chunk_nt_dpbf16<2>(a, k, b, n0, n1, acc);
        case 3: return chunk_nt_dpbf16<3>(a, k, b, n0, n1, acc);
        default: return chunk_nt_dpbf16<4>(a, k, b, n0, n1, acc);
      }
    }
  }
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bf16>) {
    switch (m) {
      case 1: return chunk_nt_avx512<1>(a, k, b, n0, n1, acc);
      case 2: return chunk_nt_avx512<2>(a, k, b, n0, n1, acc);
      case 3: return chunk_nt_avx512<3>(a, k, b, n0, n1, acc);
      default: return chunk_nt_avx512<4>(a, k, b, n0, n1, acc);
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
  const bool fast_nt = trans_b && nt_avx512<T>(m);
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    float acc[kSmallMMaxRows * kSmallMChunk];
    for (int64_t ci = c0; ci < c1; ++ci) {
      const int64_t n0 = ci * kSmallMChunk, n1 = std::min(n, n0 + kSmallMChunk);
      if (fast_nt) chunk_nt_fast(ap, m, k, bp, n0, n1, acc);
      else if (trans_b) chunk_nt(ap, m, k, bp, n0, n1, acc);
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
