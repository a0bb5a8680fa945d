// matmul on the CPU: one single-threaded GEMM per (batch, block of rows or columns), the
// blocks spread over the kernel pool. bf16 operands run on AMX tiles (amx_gemm.h) or as the
// backend's bf16 x bf16 -> f32 where gemm_path.h chose so; otherwise bf16/f16 operands are
// widened to f32 scratch first. Either way the product is accumulated in f32 and rounded once.
#include <algorithm>
#include <climits>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/amx_gemm.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/gemm_path.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/small_m_matmul.h"

namespace dt::kernels::cpu {
namespace {

struct Gemm {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
};

void gemm_call(const Gemm& g, int64_t m, int64_t n, const float* a, int64_t lda, const float* b, int64_t ldb, float* c) {
  sgemm(g.ta, g.tb, m, n, g.k, g.alpha, a, lda, b, ldb, g.beta, c, g.n);
}
void gemm_call(const Gemm& g, int64_t m, int64_t n, const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb,
               float* c) {
  gemm_bf16(g.ta, g.tb, m, n, g.k, g.alpha, a, lda, b, ldb, g.beta, c, g.n);
}

// Block [lo, hi) along M or N of one batch's gemm; a, b, c point at that batch.
template <class T>
void gemm_block(const Gemm& g, const T* a, const T* b, float* c, bool split_m, int64_t lo, int64_t hi) {
  int64_t lda = g.ta ? g.m : g.k, ldb = g.tb ? g.k : g.n;
  if (split_m) gemm_call(g, hi - lo, g.n, g.ta ? a + lo : a + lo * lda, lda, b, ldb, c + lo * g.n);
  else gemm_call(g, g.m, hi - lo, a, lda, g.tb ? b + lo * ldb : b + lo, ldb, c + lo);
}

template <class T>
void gemm_blocks(const Gemm& g, int64_t batch, bool b_batched, const T* a, const T* b, float* c) {
  // Split the larger of M and N into fixed blocks of kBlock lines and spread the blocks over
  // the pool. The blocks never depend on the thread count: the BLAS may round a row
  // differently depending on the size of the call it sits in, so a thread-count-dependent
  // split would make results depend on the thread count too.
  constexpr int64_t kBlock = 128;
  bool split_m = g.m >= g.n;
  int64_t lines = split_m ? g.m : g.n;
  int64_t per_batch = (lines + kBlock - 1) / kBlock;
  parallel_for(batch * per_batch, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      int64_t bi = u / per_batch, lo = (u % per_batch) * kBlock, hi = std::min(lines, lo + kBlock);
      gemm_block(g, a + bi * g.m * g.k, b_batched ? b + bi * g.k * g.n : b, c + bi * g.m * g.n, split_m, lo, hi);
    }
  });
}

// bf16 on AMX (amx_gemm.h): op(B) packed once per matmul (its panels spread over the pool),
// then blocks of rows of C spread over the pool, each written straight in bf16. A block is
// about an eighth of M (64 to 256 rows, a multiple of 32): each block streams all of B
// once, so bigger blocks read B fewer times; eight keep up to eight threads busy. The
// size follows M alone, never the thread count.
void amx_matmul(const Gemm& g, int64_t batch, bool b_batched, const uint16_t* a, const uint16_t* b, uint16_t* c) {
  const int64_t kAmxRows = std::clamp<int64_t>((g.m / 8 + 31) / 32 * 32, 64, 256);
  // The caller's buffer, named through a reference: inside the lambdas a thread_local would
  // name each worker's own (empty) instance.
  thread_local AmxPackedB caller_packed;
  AmxPackedB& packed = caller_packed;
  packed.shape_for(g.k, g.n);
  const int64_t panels = packed.panels(), row_blocks = (g.m + kAmxRows - 1) / kAmxRows;
  const int64_t lda = g.ta ? g.m : g.k, ldb = g.tb ? g.k : g.n;
  for (int64_t bi = 0; bi < batch; ++bi) {
    if (bi == 0 || b_batched) {
      const uint16_t* bb = b_batched ? b + bi * g.k * g.n : b;
      parallel_for(panels, 4, [&](int64_t lo, int64_t hi) { amx_pack_b(g.tb, bb, ldb, g.k, g.n, lo, hi, packed); });
    }
    const uint16_t* ab = a + bi * g.m * g.k;
    uint16_t* cb = c + bi * g.m * g.n;
    parallel_for(row_blocks, 1, [&](int64_t u0, int64_t u1) {
      amx_gemm_rows(g.ta, ab, lda, u0 * kAmxRows, std::min(g.m, u1 * kAmxRows), packed, g.alpha, g.beta, nullptr, cb,
                    g.n);
    });
  }
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha, float beta) {
  Gemm g{trans_a, trans_b, trans_a ? a.dim(-1) : a.dim(-2), c.dim(-1), trans_a ? a.dim(-2) : a.dim(-1), alpha, beta};
  DT_CHECK(g.m < INT_MAX && g.n < INT_MAX && g.k < INT_MAX,
           "matmul: dims M=" + std::to_string(g.m) + " N=" + std::to_string(g.n) + " K=" + std::to_string(g.k) +
               " exceed the BLAS limit of 2^31-1");
  if (small_m_matmul(a, b, c, trans_a, trans_b, alpha, beta)) return;
  int64_t batch = c.numel() / (g.m * g.n);
  bool b_batched = b.ndim() > 2;
  if (a.dtype() == DType::F32) {
    gemm_blocks(g, batch, b_batched, a.data<float>(), b.data<float>(), c.data<float>());
    return;
  }
  // a, b and c share one dtype (dispatch checks it): here bf16 or f16.
  if (a.dtype() == DType::BF16 && gemm_choice().bf16_amx) {
    amx_matmul(g, batch, b_batched, reinterpret_cast<const uint16_t*>(a.data<bf16>()),
               reinterpret_cast<const uint16_t*>(b.data<bf16>()), reinterpret_cast<uint16_t*>(c.data<bf16>()));
    return;
  }
  // Otherwise c has an f32 twin.
  Tensor c32 = Tensor::uninit(c.shape(), DType::F32);
  if (beta != 0.0f) cast(c, c32);
  if (a.dtype() == DType::BF16 && gemm_bf16_native()) {
    gemm_blocks(g, batch, b_batched, reinterpret_cast<const uint16_t*>(a.data<bf16>()),
                reinterpret_cast<const uint16_t*>(b.data<bf16>()), c32.data<float>());
  } else {
    Tensor a32 = Tensor::uninit(a.shape(), DType::F32), b32 = Tensor::uninit(b.shape(), DType::F32);
    cast(a, a32);
    cast(b, b32);
    gemm_blocks(g, batch, b_batched, a32.data<float>(), b32.data<float>(), c32.data<float>());
  }
  cast(c32, c);
}

}  // namespace dt::kernels::cpu
