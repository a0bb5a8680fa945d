// What a rank holds of its state, element by element: the unit sharded checkpoints save and
// load (engine/trainer_checkpoint.cc), declared apart so that the strategies and the ZeRO
// sharding both name it.
#pragma once
#include <string>

#include "core/tensor.h"

namespace dt::parallel {

// A rank's own elements of one of its state tensors, for sharded checkpoints: elements
// [begin, end) in row-major order of this rank's tensor `name` (a parameter "<param>", an
// optimizer tensor "<param>.<suffix>" or a counter), of this rank's shape `shape`; `data`
// holds them contiguously (a view: a save reads it, a load writes it). sharded: the
// strategy split the tensor over its group (each member holds other elements).
struct LocalPiece {
  std::string name;
  Shape shape;
  int64_t begin = 0, end = 0;
  Tensor data;
  bool sharded = false;
};

}  // namespace dt::parallel
