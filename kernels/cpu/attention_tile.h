// The CPU attention's unit of work, shared by attention_forward (keys contiguous) and
// paged_attention_forward (keys staged from their blocks), so that both give the same bits.
#pragma once
#include <cstdint>
#include <vector>

namespace dt::kernels::cpu {

// Queries per tile. 64 rows keep the strips cache-resident up to Tk of a few thousand and
// give the backward's P^T dO and dS^T Q products (inner dimension = rows) a useful depth;
// larger tiles waste more work on the masked half of the diagonal tile.
constexpr int64_t kQueryBlock = 64;

// One head's tile of m <= kQueryBlock consecutive queries (rows qld apart in q and out) over
// keys and values (rows kld apart, f32, d wide): query r sees keys [0, min(kend, n0 + r)),
// n0 = kend - m + 1 on the causal diagonal, kend where every query sees every key. Writes the m output rows and, if lse is not null, lse[r] (log-sum-exp of each score
// row). strip: scratch of m * kend floats.
void attention_tile(const float* q, int64_t qld, const float* k, const float* v, int64_t kld, int64_t m, int64_t kend,
                    int64_t n0, int64_t d, float scale, float* out, float* lse, float* strip);

// The same tile in bf16 with both products on the native bf16 GEMM (attention_bf16.cc; only where
// gemm_choice().bf16_native): q, k, v and out as bf16 bits, S and its softmax in f32, P rounded
// to bf16 for P V, each output row rounded once. The contiguous and paged kernels both call
// it for bf16 on the native GEMM, so they keep giving the same bits.
struct TileScratch {
  std::vector<float> s, o;
  std::vector<uint16_t> p16;
};
void attention_tile_bf16(const uint16_t* q, int64_t qld, const uint16_t* k, const uint16_t* v, int64_t kld, int64_t m,
                         int64_t kend, int64_t n0, int64_t d, float scale, uint16_t* out, float* lse, TileScratch& scratch);

}  // namespace dt::kernels::cpu
