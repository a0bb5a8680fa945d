// bf16 x bf16 -> f32 GEMM on AMX tiles, libdtrain's own (amx_gemm.cc says how it works).
// oneDNN 2.6, the backend Debian ships, repacks both operands on every call and reached
// 0.4-0.7 TFLOP/s per core on the model's shapes against a tile peak of ~3.3; this kernel
// packs each operand once per call into the tile layout and keeps the result in tiles over
// the whole K loop.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace dt::kernels::cpu {

// Row-major C[m,n] = alpha * op(A) op(B) + beta * C, A and B bf16 bit patterns, C in f32
// (c32) or bf16 (c16, rounded to nearest even once, from the f32 result): exactly one of
// c32 and c16 is non-null. beta == 0 ignores C's old contents (NaN included).
// Single-threaded; callers split the work (matmul.cc). Only when cpu_features().amx_bf16.
// Thread safety: may be called from many threads at once (scratch is per thread).
void amx_gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                   int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c32, uint16_t* c16, int64_t ldc);

// op(B) packed once into the tile layout, shared read-only by the threads that each compute
// some rows of C (matmul.cc): packing B once per matmul instead of once per block of rows.
// A growable scratch buffer on 64-byte boundaries: a tile row that straddles two cache lines
// costs two loads (std::vector only promises 16 bytes).
template <class T>
class TileBuffer {
 public:
  T* data() const { return p_.get(); }
  // At least n elements (old contents not kept when it grows).
  void reserve(int64_t n) {
    if (n <= size_) return;
    size_t bytes = (static_cast<size_t>(n) * sizeof(T) + 63) / 64 * 64;
    T* p = static_cast<T*>(std::aligned_alloc(64, bytes));
    if (!p) throw std::bad_alloc();
    p_.reset(p);
    size_ = n;
  }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> p_;
  int64_t size_ = 0;
};

struct AmxPackedB {
  TileBuffer<uint16_t> data;  // kp * np elements once shaped
  int64_t k = 0, n = 0, kp = 0, np = 0;  // kp: k rounded up to 32; np: n rounded up to 32
  // Sets the shape for op(B) of k x n and makes room (kept across calls: the buffer only grows).
  void shape_for(int64_t k_, int64_t n_);
  int64_t panels() const { return np / 16; }
};
// Packs panels [panel_lo, panel_hi) of 16 columns (panels() in all), so threads can share it.
void amx_pack_b(bool trans_b, const uint16_t* b, int64_t ldb, int64_t k, int64_t n, int64_t panel_lo,
                int64_t panel_hi, AmxPackedB& out);
// Rows [row_lo, row_hi) of C = alpha * op(A) B + beta * C, as amx_gemm_bf16. Each row's
// result does not depend on the range it was computed in.
void amx_gemm_rows(bool trans_a, const uint16_t* a, int64_t lda, int64_t row_lo, int64_t row_hi, const AmxPackedB& b,
                   float alpha, float beta, float* c32, uint16_t* c16, int64_t ldc);

}  // namespace dt::kernels::cpu
