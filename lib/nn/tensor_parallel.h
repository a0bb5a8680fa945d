// Tensor parallelism's layers (Megatron style) over a tp communicator, and the shard
// arithmetic that turns a single-rank tensor into a rank's part and back.
//
// Naming, in libdtrain's terms (weights [out, in], y = x W^T, nn/module.h):
//   column parallel  splits the OUTPUT features: weight rows (dim 0) over tp. The input x is
//                    whole on every rank and the output is this rank's slice of features.
//                    Forward needs no collective; backward all-reduces dx (each rank's
//                    dx = dy_r W_r is a partial sum).
//   row parallel     splits the INPUT features: weight columns (dim 1) over tp. The input is
//                    this rank's slice of features (a column-parallel layer's output) and
//                    the partial outputs are summed by an all-reduce in forward; the bias,
//                    replicated, is added once after the sum. Backward needs no collective.
// (docs/parallel.md maps these names onto both seeds' y = Wx and Y = XW conventions.)
//
// A column-parallel layer followed by a row-parallel one (attention's qkv then proj, the
// MLP's fc then proj) costs one all-reduce forward and one backward, of the activation
// [rows, d_model] in the model dtype.
//
// Initialization: a rank's weight is exactly its part of the single-rank weight (the same
// name, seed and counter-based draws), so tp = N starts bitwise where tp = 1 starts.
#pragma once
#include <vector>

#include "comm/communicator.h"
#include "nn/module.h"

namespace dt::nn {

// The group a layer splits over; comm null: tp = 1 (the layer is the plain one).
struct TpGroup {
  comm::Communicator* comm = nullptr;
  int size() const { return comm ? comm->size() : 1; }
  int rank() const { return comm ? comm->rank() : 0; }
};

// The shape of rank `rank`'s part of a `whole` shape under `spec` (of `size` ranks).
// INVALID_ARGUMENT when a segment does not divide by size, naming the tensor.
Shape shard_shape(const std::string& name, const Shape& whole, const ShardSpec& spec, int size);
// Rank `rank`'s part of `whole` (a new tensor on whole's device and in its dtype), and the
// reverse: `part` written into its place in `whole`. Replicated: the whole tensor.
Tensor take_shard(const Tensor& whole, const ShardSpec& spec, int rank, int size, MemTag tag = MemTag::Workspace);
void place_shard(const Tensor& part, const ShardSpec& spec, int rank, int size, Tensor& whole);

// Sums t over the group, in place (identity for tp = 1).
void all_reduce_sum(const TpGroup& tp, Tensor& t);

class ColumnParallelLinear : public Module {
 public:
  // out (or each of `segments`, which sum to out) must divide by tp.size().
  ColumnParallelLinear(const std::string& name, int64_t in, int64_t out, bool bias, uint64_t seed, float std,
                       DType dtype, TpGroup tp, std::vector<int64_t> segments = {});
  void collect(ParamList& out) override;
  // x: [..., in], whole -> y: [rows, out / tp], this rank's features.
  void forward(const Tensor& x, Tensor& y);
  // dy: [rows, out / tp]; dx: [..., in], overwritten with the whole gradient (all-reduced).
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx);
  int64_t in, out, out_local;
  TpGroup tp;
  Parameter weight, bias;  // [out / tp, in], [out / tp]: split(dim=0, tp)
};

class RowParallelLinear : public Module {
 public:
  // in must divide by tp.size().
  RowParallelLinear(const std::string& name, int64_t in, int64_t out, bool bias, uint64_t seed, float std,
                    DType dtype, TpGroup tp);
  void collect(ParamList& out) override;
  // x: [..., in / tp], this rank's features -> y: [rows, out], whole (all-reduced) + bias.
  void forward(const Tensor& x, Tensor& y);
  // dy: [rows, out], whole; dx: [..., in / tp], overwritten.
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx);
  int64_t in, out, in_local;
  TpGroup tp;
  Parameter weight, bias;  // [out, in / tp]: split(dim=1, tp); [out]: replicated
};

}  // namespace dt::nn
