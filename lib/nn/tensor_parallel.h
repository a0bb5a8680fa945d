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
// Sequence parallelism (Megatron SP, TpGroup::sequence_parallel): outside those regions (the
// norms and the residual stream) each rank holds only its share of the tokens: the [B, T]
// positions flattened to rows, rank r owning rows [r R/N, (r+1) R/N) of R = B T, so a
// share is one contiguous run and R must divide by N (Megatron splits T of a [T, B, C]
// stream; splitting the flattened rows is the same idea without requiring T % N == 0).
// Entering a region all-gathers the tokens (gather_tokens) and leaving it reduce-scatters
// them (sum_partial), in place of the identity and the all-reduce: an all-gather and a
// reduce-scatter move what one all-reduce moves. The whole-token tensors live in buffers
// the group's layers share (SpBuffers) and are never kept for backward, which gathers a
// region's input again (as Megatron does), so the activations a block keeps outside its
// split internals are 1/N. The norms' parameters see only this rank's tokens: their
// gradients are partial sums (Parameter::grad_partial_over_tp) that the TP strategy sums
// over tp after backward.
//
// Initialization: a rank's weight is exactly its part of the single-rank weight (the same
// name, seed and counter-based draws), so tp = N starts bitwise where tp = 1 starts.
#pragma once
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "nn/module.h"

namespace dt::nn {

// Sequence parallelism's whole-token scratch, one per model (shared by its layers): a
// gathered input or output gradient, and a partial sum before its reduce-scatter. Each is
// valid from the call that fills it until the next such call on the group.
struct SpBuffers {
  Tensor gathered, partial;
  bool paused = false;  // inference over a KV cache runs tensor parallel only (GPT::forward_cached)
};

// The group a layer splits over; comm null: tp = 1 (the layer is the plain one).
struct TpGroup {
  TpGroup() = default;
  explicit TpGroup(comm::Communicator* c, bool sp = false) : comm(c), sequence_parallel(sp) {}
  comm::Communicator* comm = nullptr;
  bool sequence_parallel = false;  // the stream outside the regions split over tokens (above)
  std::shared_ptr<SpBuffers> buffers;  // made by the model under SP (nn::GPT)
  bool sp() const { return sequence_parallel && size() > 1 && !(buffers && buffers->paused); }
  int size() const { return comm ? comm->size() : 1; }
  int rank() const { return comm ? comm->rank() : 0; }
};

// Sequence parallelism off for the scope (a KV-cache step runs tensor parallel only).
struct PauseSequenceParallel {
  explicit PauseSequenceParallel(const TpGroup& tp) : b(tp.buffers.get()) {
    if (b) b->paused = true;
  }
  ~PauseSequenceParallel() {
    if (b) b->paused = false;
  }
  PauseSequenceParallel(const PauseSequenceParallel&) = delete;
  PauseSequenceParallel& operator=(const PauseSequenceParallel&) = delete;
  SpBuffers* b;
};

// The shape of rank `rank`'s part of a `whole` shape under `spec` (of `size` ranks).
// INVALID_ARGUMENT when a segment does not divide by size, naming the tensor.
Shape shard_shape(const std::string& name, const Shape& whole, const ShardSpec& spec, int size);
// Rank `rank`'s part of `whole` (a new tensor on whole's device and in its dtype), and the
// reverse: `part` written into its place in `whole`. Replicated: the whole tensor.
Tensor take_shard(const Tensor& whole, const ShardSpec& spec, int rank, int size, MemTag tag = MemTag::Workspace);
void place_shard(const Tensor& part, const ShardSpec& spec, int rank, int size, Tensor& whole);

// Makes the single-rank parameter p this rank's part of it under spec: its value cut, its
// grad sized to the part; name, init and the rest kept. A no-op for tp = 1.
void shard_parameter(Parameter& p, const ShardSpec& spec, const TpGroup& tp);

// Adds the squares of a gradient's elements [begin, begin + flat.numel()) (flat holds
// exactly those, of p's part flattened) to `split` or `replicated`, by p's spec, split
// elements weighted by p.norm_weight_runs: the pieces of a squared gradient norm that
// parallel::SquaredNorm sums over the axes.
void add_grad_squares(const Parameter& p, const Tensor& flat, int64_t begin, double& split, double& replicated);

// Sums t over the group, in place (identity for tp = 1).
void all_reduce_sum(const TpGroup& tp, Tensor& t);

// Entering a region: the region's input, whole, shaped `whole` (B T = rows x N). SP: the
// all-gather of every rank's token rows of `local` into buffers->gathered (valid until the
// next gather on the group), or into *into when given (a buffer the caller keeps);
// otherwise local itself.
Tensor gather_tokens(const TpGroup& tp, const Tensor& local, const Shape& whole, Tensor* into = nullptr);
// Leaving a region (forward) or entering it (backward): each rank has a partial sum of a
// whole-token result that `out` gets the sum of. partial_buffer gives where to write the
// partial: `out` itself (ensured to `whole`, or kept when it holds as many elements) unless
// SP, then buffers->partial (with out ensured to this rank's rows). sum_partial then sums:
// an all-reduce in place, or under SP a reduce-scatter of the token rows into out.
Tensor& partial_buffer(const TpGroup& tp, const Shape& whole, DType dtype, Tensor& out);
void sum_partial(const TpGroup& tp, Tensor& partial, Tensor& out);
// This rank's token rows of a whole [R, ...] tensor (a view; the whole itself unless SP).
Tensor local_tokens(const TpGroup& tp, const Tensor& whole);

class ColumnParallelLinear : public Module {
 public:
  // out (or each of `segments`, which sum to out) must divide by tp.size() (a segment held
  // by k ranks each, `replicas`: by tp.size() / k).
  ColumnParallelLinear(const std::string& name, int64_t in, int64_t out, bool bias, uint64_t seed, float std,
                       DType dtype, TpGroup tp, std::vector<int64_t> segments = {},
                       std::vector<int64_t> replicas = {});
  void collect(ParamList& out) override;
  // x: [R, in], whole (under SP the caller gathers it: gather_tokens, and gathers it again
  // for backward) -> y: [R, out / tp], this rank's features. with_bias false leaves the bias
  // out of y, for a caller that adds it in a fused pass (MLP: bias_gelu_forward).
  void forward(const Tensor& x, Tensor& y, bool with_bias = true);
  // dy: [R, out / tp]; dx overwritten with the summed gradient of the input: [R, in], or
  // under SP this rank's tokens [R / tp, in]. with_bias false: the caller has accumulated
  // the bias gradient itself (bias_gelu_backward).
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx, bool with_bias = true);
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
  // x: [R, in / tp], this rank's features -> y: [R, out] summed over tp + bias (under SP
  // this rank's token rows [R / tp, out]).
  void forward(const Tensor& x, Tensor& y);
  // dy: the gradient of y (of y's shape); dx: [R, in / tp], overwritten. The bias gradient
  // is the whole one on every rank (under SP from the gathered dy).
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx);
  int64_t in, out, in_local;
  TpGroup tp;
  Parameter weight, bias;  // [out, in / tp]: split(dim=1, tp); [out]: replicated
};

}  // namespace dt::nn
