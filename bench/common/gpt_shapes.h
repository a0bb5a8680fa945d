// The matmul shapes of a small GPT: tokens T x model width d, for the three linear layers
// of a block (QKV projection [T,d]x[d,3d], MLP up [T,d]x[d,4d], MLP down [T,4d]x[4d,d]),
// each forward and in the two backward products:
//   fwd : y  = x  W      [T,in]x[in,out]
//   dW  : dW = x^T dy    a = x [T,in] read transposed (trans_a): [in,T]x[T,out]
//   dX  : dx = dy W^T    b = W [in,out] read transposed (trans_b): [T,out]x[out,in]
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dt::bench {

struct GemmShape {
  std::string name;  // e.g. "T1024.d384.qkv.fwd"
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;  // C[m,n] = op(A)[m,k] op(B)[k,n]
  // Stored (row-major) shapes of A and B.
  int64_t a_rows() const { return trans_a ? k : m; }
  int64_t a_cols() const { return trans_a ? m : k; }
  int64_t b_rows() const { return trans_b ? n : k; }
  int64_t b_cols() const { return trans_b ? k : n; }
  int64_t lda() const { return a_cols(); }
  int64_t ldb() const { return b_cols(); }
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

}  // namespace dt::bench
