// The AMX bf16 GEMM. An AMX core holds 8 tile registers of 16 rows x 64 bytes; TDPBF16PS
// multiplies a 16 x 32 bf16 tile of A by a 32 x 16 bf16 tile of B, stored as 16 rows of
// 16 (k, k+1) pairs ("VNNI" order), into a 16 x 16 f32 tile of C.
//
// One call:
//   1. B is packed once into panels of 16 columns, K padded to a multiple of 32 with zeros,
//      each panel K/2 rows of 16 pairs: one tile load per 32 x 16 piece, 64-byte rows.
//   2. A caller's rows (matmul.cc gives each thread blocks of 64-256) are packed at once
//      (rows padded to 32, K to 32, zeros; a transposed A by 16 x 16 blocks).
//   3. K runs in passes (kKChunk; one pass up to kOnePassK). In a pass, 32 rows of A stay
//      in L1 while the pairs of B panels stream by from L2, the next pair prefetched. Each
//      32 x 32 piece of C lives in tiles 0-3 for the pass (A in tiles 4-5, B in 6-7: four
//      independent products per step, enough to hide TDPBF16PS's latency); between passes
//      it waits in an f32 buffer, and after the last it goes through the epilogue (alpha,
//      beta, bf16 rounding, edges) once.
// Zero padding makes every edge a full tile: the padded rows and columns are computed and
// dropped. The order of the K sum is fixed by the shape alone, so results do not depend on
// the thread count.
#include "kernels/cpu/amx_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "core/dtype.h"
#include "kernels/cpu/amx_tiles.h"

// GCC 12's AVX-512 headers start masked intrinsics from _mm512_undefined_*(), which its
// uninitialized-use warnings flag once inlined here (a known false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace dt::kernels::cpu {
namespace {

constexpr int64_t kTile = 16;      // rows of a tile; columns of C and B per tile
constexpr int64_t kTileK = 32;     // bf16 elements of K per tile
// K per pass: 32 rows of A and two B panels over 256 of K (16 + 16 KiB) stay in L1 with room
// to spare (at 384 they fill its 48 KiB and a 32 x 32 block ran at 0.54 of the tile peak, at
// 256 at 0.58, streaming B); a K of at most 384 still runs in one pass, saving the f32 round
// trip of C between passes.
constexpr int64_t kKChunk = 256, kOnePassK = 384;

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }


// Transposes a 16 x 16 block of 32-bit elements held in r[0..15] (r[i][c] -> r[c][i]):
// 32-bit and 64-bit unpacks inside 128-bit lanes, then two rounds of lane shuffles.
__attribute__((target("avx512f"))) void transpose_16x16_u32(__m512i r[16]) {
  __m512i a[16], b[16];
  for (int k = 0; k < 8; ++k) {
    a[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
    a[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
  }
  // b[4m + j], lane L: rows 4m..4m+3 of column 4L + j.
  for (int m = 0; m < 4; ++m) {
    b[4 * m + 0] = _mm512_unpacklo_epi64(a[4 * m], a[4 * m + 2]);
    b[4 * m + 1] = _mm512_unpackhi_epi64(a[4 * m], a[4 * m + 2]);
    b[4 * m + 2] = _mm512_unpacklo_epi64(a[4 * m + 1], a[4 * m + 3]);
    b[4 * m + 3] = _mm512_unpackhi_epi64(a[4 * m + 1], a[4 * m + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    __m512i s0 = _mm512_shuffle_i32x4(b[j], b[4 + j], 0x44), s1 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], 0x44);
    __m512i s2 = _mm512_shuffle_i32x4(b[j], b[4 + j], 0xEE), s3 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], 0xEE);
    r[j] = _mm512_shuffle_i32x4(s0, s1, 0x88);
    r[4 + j] = _mm512_shuffle_i32x4(s0, s1, 0xDD);
    r[8 + j] = _mm512_shuffle_i32x4(s2, s3, 0x88);
    r[12 + j] = _mm512_shuffle_i32x4(s2, s3, 0xDD);
  }
}

// op(A) = A^T with A stored k x m: 16 rows of op(A) by 32 of K at a time. Each (k, k+1) pair
// of a row is one 32-bit element, so the block is a 16 x 16 transpose of 32-bit pairs.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void pack_a_transposed(const uint16_t* a, int64_t lda, int64_t k,
                                                                              int64_t i0, int64_t live, int64_t rows,
                                                                              int64_t kp, uint16_t* dst) {
  uint32_t* out = reinterpret_cast<uint32_t*>(dst);
  const int64_t half = kp / 2;
  for (int64_t ib = 0; ib < rows; ib += kTile) {
    const int64_t n_live = std::max<int64_t>(0, std::min(kTile, live - ib));
    const __mmask16 mask = static_cast<__mmask16>((1u << n_live) - 1);
    for (int64_t p0 = 0; p0 < half; p0 += kTile) {
      __m512i r[16];
      for (int64_t p = 0; p < kTile; ++p) {
        const int64_t kk = 2 * (p0 + p);
        if (n_live == 0 || kk >= k) {
          r[p] = _mm512_setzero_si512();
          continue;
        }
        const uint16_t* row = a + kk * lda + i0 + ib;
        __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, row));
        __m512i hi = kk + 1 < k ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, row + lda)) : _mm512_setzero_si512();
        r[p] = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
      }
      transpose_16x16_u32(r);
      for (int64_t i = 0; i < kTile; ++i) _mm512_storeu_si512(out + (ib + i) * half + p0, r[i]);
    }
  }
}

// op(A)[i][kk] for i in [i0, i0 + rows), into dst[rows_padded][kp] with zero padding.
void pack_a(bool ta, const uint16_t* a, int64_t lda, int64_t m, int64_t k, int64_t i0, int64_t rows, int64_t kp,
            uint16_t* dst) {
  const int64_t live = std::min(rows, m - i0);
  if (ta) return pack_a_transposed(a, lda, k, i0, live, rows, kp, dst);
  for (int64_t i = 0; i < rows; ++i) {
    uint16_t* row = dst + i * kp;
    if (i >= live) {
      std::memset(row, 0, sizeof(uint16_t) * kp);
      continue;
    }
    std::memcpy(row, a + (i0 + i) * lda, sizeof(uint16_t) * k);
    std::memset(row + k, 0, sizeof(uint16_t) * (kp - k));
  }
}

// Interleaves two rows of 16 bf16 (k and k + 1) into 16 (k, k+1) pairs: one VNNI row.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void interleave_rows(const uint16_t* r0, const uint16_t* r1, int64_t live,
                                                                  uint16_t* out) {
  alignas(64) static const uint16_t order[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                                 8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  const __m512i idx = _mm512_load_si512(order);
  const __mmask16 mask = static_cast<__mmask16>((1u << live) - 1);
  __m512i lo = _mm512_castsi256_si512(_mm256_maskz_loadu_epi16(mask, r0));
  __m512i hi = r1 ? _mm512_castsi256_si512(_mm256_maskz_loadu_epi16(mask, r1)) : _mm512_setzero_si512();
  _mm512_storeu_si512(out, _mm512_permutex2var_epi16(lo, idx, hi));
}

// op(B) (k x n) into panels of 16 columns: panel p, pair row r, column j, half h at
// dst[((p * kp / 2 + r) * 16 + j) * 2 + h] = op(B)[2r + h][16p + j], zero outside.
void pack_b(bool tb, const uint16_t* b, int64_t ldb, int64_t k, int64_t n, int64_t kp, int64_t np, uint16_t* dst,
            int64_t panel_lo) {
  for (int64_t p = panel_lo; p < np / kTile; ++p) {
    uint16_t* panel = dst + p * kp * kTile;
    const int64_t j_live = std::max<int64_t>(0, std::min(kTile, n - p * kTile));
    if (j_live == 0) {
      std::memset(panel, 0, sizeof(uint16_t) * kp * kTile);
      continue;
    }
    if (!tb) {
      for (int64_t kk = 0; kk < kp; kk += 2) {
        const uint16_t* r0 = kk < k ? b + kk * ldb + p * kTile : nullptr;
        const uint16_t* r1 = kk + 1 < k ? b + (kk + 1) * ldb + p * kTile : nullptr;
        if (r0) interleave_rows(r0, r1, j_live, panel + kk * kTile);
        else std::memset(panel + kk * kTile, 0, sizeof(uint16_t) * 2 * kTile);
      }
    } else {
      // Each column of op(B) is a row of B: its (k, k+1) pairs are adjacent already.
      std::memset(panel, 0, sizeof(uint16_t) * kp * kTile);
      for (int64_t j = 0; j < j_live; ++j) {
        const uint16_t* src = b + (p * kTile + j) * ldb;
        uint16_t* out = panel + 2 * j;
        int64_t kk = 0;
        for (; kk + 1 < k; kk += 2) std::memcpy(out + kk * kTile, src + kk, 2 * sizeof(uint16_t));
        if (kk < k) out[kk * kTile] = src[kk];
      }
    }
  }
}

// f32 -> bf16 bits, round to nearest even, NaN kept quiet (as f32_to_bf16_bits).
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m256i round_bf16(__m512 x) {
  __m512i u = _mm512_castps_si512(x);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
  return _mm512_cvtepi32_epi16(r);
}

// C[rows x cols] from the 32 x 32 f32 block t, 16 columns at a time; one instantiation per
// output type and beta, so the loop carries no branches.
template <bool kOut16, bool kBeta>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void epilogue_as(const float* t, int64_t rows, int64_t cols,
                                                                      float alpha, float beta, void* c, int64_t ldc) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; j += 16) {
      const __mmask16 mask = static_cast<__mmask16>(cols - j >= 16 ? 0xffff : (1u << (cols - j)) - 1);
      __m512 v = _mm512_mul_ps(va, _mm512_load_ps(t + i * 32 + j));
      if constexpr (kOut16) {
        uint16_t* dst = static_cast<uint16_t*>(c) + i * ldc + j;
        if constexpr (kBeta) {
          __m512i old = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, dst));
          v = _mm512_fmadd_ps(vb, _mm512_castsi512_ps(_mm512_slli_epi32(old, 16)), v);
        }
        _mm256_mask_storeu_epi16(dst, mask, round_bf16(v));
      } else {
        float* dst = static_cast<float*>(c) + i * ldc + j;
        if constexpr (kBeta) v = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask, dst), v);
        _mm512_mask_storeu_ps(dst, mask, v);
      }
    }
  }
}

void epilogue(const float* t, int64_t rows, int64_t cols, float alpha, float beta, float* c32, uint16_t* c16,
              int64_t ldc) {
  if (c16) {
    if (beta != 0.0f) return epilogue_as<true, true>(t, rows, cols, alpha, beta, c16, ldc);
    return epilogue_as<true, false>(t, rows, cols, alpha, beta, c16, ldc);
  }
  if (beta != 0.0f) return epilogue_as<false, true>(t, rows, cols, alpha, beta, c32, ldc);
  return epilogue_as<false, false>(t, rows, cols, alpha, beta, c32, ldc);
}

// One 32 x 32 piece of C in tiles 0-3: zeroed (init null) or loaded from init (f32 rows
// ld_init apart), plus packed A rows (a_ld elements apart) x two B panels over K [k_lo, k_hi),
// stored to out (rows ld_out apart).
__attribute__((target("amx-tile,amx-bf16"))) void block_32x32(const uint16_t* ap, int64_t a_ld, const uint16_t* bp0,
                                                                const uint16_t* bp1, int64_t k_lo, int64_t k_hi,
                                                                const float* init, int64_t ld_init, float* out,
                                                                int64_t ld_out, const uint16_t* next0,
                                                                const uint16_t* next1) {
  const int64_t a_stride = a_ld * 2;  // bytes
  if (init) {
    _tile_loadd(0, init, ld_init * 4);
    _tile_loadd(1, init + 16, ld_init * 4);
    _tile_loadd(2, init + 16 * ld_init, ld_init * 4);
    _tile_loadd(3, init + 16 * ld_init + 16, ld_init * 4);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t k0 = k_lo; k0 < k_hi; k0 += kTileK) {
    _tile_loadd(4, ap + k0, a_stride);
    _tile_loadd(5, ap + kTile * a_ld + k0, a_stride);
    _tile_loadd(6, bp0 + k0 * kTile, 64);
    _tile_loadd(7, bp1 + k0 * kTile, 64);
    if (next0) {
      // The next block's B panels, this step's rows of them, into L1 (16 lines each).
      const char* n0 = reinterpret_cast<const char*>(next0 + k0 * kTile);
      const char* n1 = reinterpret_cast<const char*>(next1 + k0 * kTile);
      for (int line = 0; line < 16; ++line) {
        _mm_prefetch(n0 + 64 * line, _MM_HINT_T0);
        _mm_prefetch(n1 + 64 * line, _MM_HINT_T0);
      }
    }
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, out, ld_out * 4);
  _tile_stored(1, out + 16, ld_out * 4);
  _tile_stored(2, out + 16 * ld_out, ld_out * 4);
  _tile_stored(3, out + 16 * ld_out + 16, ld_out * 4);
}

__attribute__((target("amx-tile"))) void release_tiles() { _tile_release(); }

}  // namespace

void amx_pack_b(bool trans_b, const uint16_t* b, int64_t ldb, int64_t k, int64_t n, int64_t panel_lo,
                int64_t panel_hi, AmxPackedB& out) {
  pack_b(trans_b, b, ldb, k, n, out.kp, panel_hi * kTile, out.data.data(), panel_lo);
}

void AmxPackedB::shape_for(int64_t k_, int64_t n_) {
  k = k_;
  n = n_;
  kp = round_up(std::max<int64_t>(k, 1), kTileK);
  np = round_up(n, 2 * kTile);
  data.reserve(kp * np);
}

void amx_gemm_rows(bool trans_a, const uint16_t* a, int64_t lda, int64_t row_lo, int64_t row_hi, const AmxPackedB& b,
                   float alpha, float beta, float* c32, uint16_t* c16, int64_t ldc) {
  if (row_hi <= row_lo) return;
  const int64_t kp = b.kp, n = b.n, np = b.np, rows_p = round_up(row_hi - row_lo, 2 * kTile);
  thread_local TileBuffer<uint16_t> a_pack;
  thread_local TileBuffer<float> acc;
  a_pack.reserve(rows_p * kp);
  const int64_t chunk = kp <= kOnePassK ? kp : kKChunk;
  if (kp > chunk) acc.reserve(rows_p * np);
  pack_a(trans_a, a, lda, row_hi, b.k, row_lo, rows_p, kp, a_pack.data());
  alignas(64) float t[32 * 32];
  configure_tiles_16x64();
  for (int64_t c0 = 0; c0 < kp; c0 += chunk) {
    const int64_t c1 = std::min(kp, c0 + chunk);
    for (int64_t r0 = 0; r0 < rows_p; r0 += 2 * kTile) {
      for (int64_t j0 = 0; j0 < np; j0 += 2 * kTile) {
        const uint16_t* bp0 = b.data.data() + (j0 / kTile) * kp * kTile;
        const uint16_t* next = j0 + 2 * kTile < np ? bp0 + 2 * kp * kTile : nullptr;
        const float* init = c0 == 0 ? nullptr : acc.data() + r0 * np + j0;
        if (c1 < kp) {
          block_32x32(a_pack.data() + r0 * kp, kp, bp0, bp0 + kp * kTile, c0, c1, init, np, acc.data() + r0 * np + j0,
                      np, next, next ? next + kp * kTile : nullptr);
          continue;
        }
        block_32x32(a_pack.data() + r0 * kp, kp, bp0, bp0 + kp * kTile, c0, c1, init, np, t, 32, next,
                    next ? next + kp * kTile : nullptr);
        const int64_t live_rows = std::min<int64_t>(2 * kTile, row_hi - row_lo - r0);
        const int64_t cols = std::min<int64_t>(2 * kTile, n - j0);
        const int64_t off = (row_lo + r0) * ldc + j0;
        epilogue(t, live_rows, cols, alpha, beta, c32 ? c32 + off : nullptr, c16 ? c16 + off : nullptr, ldc);
      }
    }
  }
  release_tiles();
}

void amx_gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                   int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c32, uint16_t* c16, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  thread_local AmxPackedB packed;
  packed.shape_for(k, n);
  amx_pack_b(trans_b, b, ldb, k, n, 0, packed.panels(), packed);
  amx_gemm_rows(trans_a, a, lda, 0, m, packed, alpha, beta, c32, c16, ldc);
}

}  // namespace dt::kernels::cpu
