// A trainable parameter: a stable name, its value and gradient, and how it is sharded.
// Names are dotted paths ("blocks.3.attn.qkv.weight") that checkpoints, the counter-based
// initializer and every parallel strategy key on; the sharding spec says which dim (if any)
// is split over which mesh axis, so TP, ZeRO and checkpoints all read the same fact.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace dt::nn {

struct ShardSpec {
  int dim = -1;      // -1: replicated; otherwise the dim split over `axis`
  std::string axis;  // "tp", "ep", ... (empty when replicated)
  // The dim's segments in the single-rank layout, each split evenly over the axis, rank r
  // holding the r-th part of every segment in order (a fused q|k|v weight: one segment per
  // projection); empty: the whole dim is one segment.
  std::vector<int64_t> segments;
  // The dim (one segment) need not divide by the axis size: each rank holds ceil(extent /
  // size) rows, the last ranks' parts ending in zero padding that never reaches a whole
  // tensor (a vocabulary split over tp).
  bool pad = false;
  // Per segment (empty: 1 each): how many consecutive ranks hold each of its parts, the
  // segment splitting into size / replicas parts. GQA with fewer KV heads than tp ranks:
  // each KV head's rows are held by the tp / n_kv_head ranks whose query heads read it.
  std::vector<int64_t> segment_replicas = {};
  int64_t replicas_of(size_t segment) const {
    return segment < segment_replicas.size() ? segment_replicas[segment] : 1;
  }
  bool replicated() const { return dim < 0; }
  std::string str() const {
    if (replicated()) return "replicated";
    std::string seg;
    for (size_t i = 0; i < segments.size(); ++i)
      seg += (i == 0 ? ", segments " : "+") + std::to_string(segments[i]) +
             (replicas_of(i) > 1 ? "(x" + std::to_string(replicas_of(i)) + ")" : "");
    return "split(dim=" + std::to_string(dim) + ", " + axis + seg + (pad ? ", padded" : "") + ")";
  }
};

// One named tensor of a model's or optimizer's state, as saved and loaded (io/checkpoint.h
// calls it CheckpointTensor): parameters, optimizer moments, masters, counters.
struct StateTensor {
  std::string name;
  Tensor tensor;  // CPU for the loader; loading writes into it in place
  ShardSpec spec;
};

struct Parameter {
  std::string name;
  Tensor value;  // MemTag::Param
  Tensor grad;   // MemTag::Grad, same shape and dtype; accumulated by backward (+=)
  // The value's shape, kept while ZeRO has released the value or the grad (either may be
  // undefined between steps then; parallel/zero.h).
  Shape shape;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  ShardSpec spec;
  // Sequence parallel (nn/tensor_parallel.h): a replicated parameter applied to this rank's
  // tokens only (the norms), so its gradient is this rank's part of the sum over tp.
  bool grad_partial_over_tp = false;
  // How much each element of a split parameter counts in the global gradient norm, as runs
  // (elements, weight) over the part in order; empty: 1 throughout. Elements held by k
  // ranks of the axis (ShardSpec::segment_replicas) weigh 1/k: the split part of the norm
  // is summed over every rank of the axis, and those k hold the same gradient.
  std::vector<std::pair<int64_t, double>> norm_weight_runs;
  // How the value was initialized, so a shard can be re-created at its global offset.
  enum class Init { Zeros, Ones, Normal } init = Init::Normal;
  float init_std = 0.02f;
};

using ParamList = std::vector<Parameter*>;

}  // namespace dt::nn
