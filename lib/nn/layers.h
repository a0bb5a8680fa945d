// The simple modules: Linear, Embedding, Norm (LayerNorm or RMSNorm) and the transformer's
// MLP (GELU or SwiGLU). Each takes its dotted name prefix ("blocks.0.mlp.fc") and derives
// its parameter names from it ("blocks.0.mlp.fc.weight").
#pragma once
#include "nn/module.h"
#include "nn/tensor_parallel.h"

namespace dt::nn {

// y = x W^T (+ b); weight [out, in] (see module.h), bias [out]. Its saved activation is
// its input, which the caller keeps.
class Linear : public Module {
 public:
  Linear(const std::string& name, int64_t in, int64_t out, bool bias, uint64_t seed, float std = 0.02f,
         DType dtype = DType::F32);
  void collect(ParamList& out) override;
  // x: [..., in] -> y: [..., out], allocated (or reused) by ensure().
  void forward(const Tensor& x, Tensor& y);
  // dx: [..., in], overwritten; undefined to skip it.
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx);
  int64_t in, out;
  Parameter weight, bias;  // bias.value undefined without bias
};

// A [num, dim] table indexed by i32 ids: token embeddings, and learned positions.
class Embedding : public Module {
 public:
  Embedding(const std::string& name, int64_t num, int64_t dim, uint64_t seed, float std = 0.02f,
            DType dtype = DType::F32);
  // out takes the table's dtype.
  void collect(ParamList& out) override;
  void forward(const Tensor& ids, Tensor& out);  // out: ids.shape + [dim]
  void backward(const Tensor& ids, const Tensor& dout);
  Parameter weight;
};

enum class NormKind { LayerNorm, RMSNorm };
const char* norm_name(NormKind k);

// LayerNorm (weight and, optionally, bias) or RMSNorm (weight only) over the last dim.
class Norm : public Module {
 public:
  struct Acts {
    Tensor x, y, mean, rstd;  // x is the caller's input, kept by reference (shared storage)
  };
  Norm(const std::string& name, int64_t dim, NormKind kind, bool bias, float eps, DType dtype = DType::F32);
  void collect(ParamList& out) override;
  const Tensor& forward(const Tensor& x, Acts& a);
  void backward(const Tensor& dy, Acts& a, Tensor& dx);  // dx overwritten
  NormKind kind;
  float eps;
  Parameter weight, bias;
};

enum class Act { GELU, SwiGLU };
const char* act_name(Act a);

// The transformer's feed-forward: proj(act(fc(x))). For SwiGLU, fc is one fused [2*d_ff, C]
// weight whose rows [0, d_ff) make the gate and [d_ff, 2*d_ff) the up projection:
// act = silu(gate) * up. proj is a residual projection, so it takes proj_std.
// Tensor parallel (tp of size N > 1): fc column parallel (gate and up each split), proj row
// parallel, each rank holding d_ff / N hidden features; one all-reduce forward, one backward
// (under sequence parallelism an all-gather and a reduce-scatter each way instead).
class MLP : public Module {
 public:
  struct Acts {
    Tensor x, h, gate, up, a, y;  // x: the input as given; y: [R, C]; h: fc output before its bias (GELU); gate, up (SwiGLU)
    Tensor da, dh, dgate, dup;    // backward scratch
  };
  MLP(const std::string& name, int64_t d_model, int64_t d_ff, Act act, bool bias, uint64_t seed, float proj_std,
      DType dtype = DType::F32, TpGroup tp = {});
  void collect(ParamList& out) override;
  // x: [..., C] -> y [R, C], R the rows of x (under SP this rank's token rows, in and out).
  const Tensor& forward(const Tensor& x, Acts& a);
  void backward(const Tensor& dy, Acts& a, Tensor& dx);
  Act act;
  int64_t d_ff;  // this rank's hidden features (the whole layer's / tp)
  TpGroup tp;
  ColumnParallelLinear fc;
  RowParallelLinear proj;

 private:
  Shape whole_rows(const Tensor& x) const;
};

}  // namespace dt::nn
