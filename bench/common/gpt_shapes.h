// The matmul shapes of a small GPT: tokens T x model width d, for the three linear layers
// of a block (QKV projection [T,d]x[d,3d], MLP up [T,d]x[d,4d], MLP down [T,4d]x[4d,d]),
// each forward and in the two backward products:
//   fwd : y  = x  W      [T,in]x[in,out]
//   dW  : dW = x^T dy    a = x [T,in] read transposed (trans_a): [in,T]x[T,out]
//   dX  : dx = dy W^T    b = W [in,out] read transposed (trans_b): [T,out]x[out,in]
// and the sgemm calls of the CPU attention on one tile (attention_tile_shapes).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dt::bench {

struct GemmShape {
  std::string name;  // e.g. "T1024.d384.qkv.fwd"
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;  // C[m,n] = op(A)[m,k] op(B)[k,n]
  // Leading dimensions where a matrix is a column block of a wider one (attention reads one
  // head out of rows holding every head); 0: dense, derived from the shape.
  int64_t lda_set = 0, ldb_set = 0, ldc_set = 0;
  // Stored (row-major) shapes of A, B and C; a buffer holds rows x ld floats.
  int64_t a_rows() const { return trans_a ? k : m; }
  int64_t a_cols() const { return trans_a ? m : k; }
  int64_t b_rows() const { return trans_b ? n : k; }
  int64_t b_cols() const { return trans_b ? k : n; }
  int64_t lda() const { return lda_set ? lda_set : a_cols(); }
  int64_t ldb() const { return ldb_set ? ldb_set : b_cols(); }
  int64_t ldc() const { return ldc_set ? ldc_set : n; }
  size_t a_size() const { return static_cast<size_t>(a_rows() * lda()); }
  size_t b_size() const { return static_cast<size_t>(b_rows() * ldb()); }
  size_t c_size() const { return static_cast<size_t>(m * ldc()); }
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
};

// quick: T = 1024, d = 384 only; otherwise T in {1024, 4096} x d in {384, 768, 1024}.
inline std::vector<GemmShape> gpt_gemm_shapes(bool quick) {
  std::vector<int64_t> tokens = quick ? std::vector<int64_t>{1024} : std::vector<int64_t>{1024, 4096};
  std::vector<int64_t> widths = quick ? std::vector<int64_t>{384} : std::vector<int64_t>{384, 768, 1024};
  struct Layer {
    const char* name;
    int in_mult, out_mult;
  };
  const Layer layers[] = {{"qkv", 1, 3}, {"up", 1, 4}, {"down", 4, 1}};
  std::vector<GemmShape> out;
  for (int64_t t : tokens)
    for (int64_t d : widths)
      for (const Layer& l : layers) {
        int64_t in = d * l.in_mult, o = d * l.out_mult;
        std::string base = "T" + std::to_string(t) + ".d" + std::to_string(d) + "." + l.name;
        out.push_back({base + ".fwd", false, false, t, o, in});
        out.push_back({base + ".dW", true, false, in, o, t});
        out.push_back({base + ".dX", false, true, t, in, o});
      }
  return out;
}

// The sgemm calls of the CPU attention (kernels/cpu/attention.cc) on one tile of 64 queries
// over `kend` keys, head dim d = 64, H = 6 heads. Q, K, V, dO hold every head of a token in
// one row, so they are read with ld = H*d; the score strip P (and dS) is dense [64, kend].
//   S  : S = Q K^T      [64,d]x[d,kend]   trans_b     (dP = dO V^T: same shape and strides)
//   PV : O = P V        [64,kend]x[kend,d]            (dQ = dS K: same)
//   dV : dV += P^T dO   [kend,64]x[64,d]  trans_a     (dK += dS^T Q: same; run with beta 0)
// quick: kend = 256 only; otherwise kend in {256, 1024}.
inline std::vector<GemmShape> attention_tile_shapes(bool quick) {
  const int64_t m = 64, d = 64, row = 6 * d;
  std::vector<int64_t> kends = quick ? std::vector<int64_t>{256} : std::vector<int64_t>{256, 1024};
  std::vector<GemmShape> out;
  for (int64_t kend : kends) {
    std::string base = "attn.kend" + std::to_string(kend);
    out.push_back({base + ".S", false, true, m, kend, d, row, row, 0});
    out.push_back({base + ".PV", false, false, m, d, kend, 0, row, row});
    out.push_back({base + ".dV", true, false, kend, d, m, 0, row, row});
  }
  return out;
}

}  // namespace dt::bench
