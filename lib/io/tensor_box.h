// Boxes: rectangular regions of a tensor (an offset and an extent per dim), the unit a
// sharded checkpoint stores and reads (io/checkpoint.h). A rank's piece of a tensor, a
// chunk in a file and a region a loader wants are all boxes of the whole tensor's index
// space; loading copies each wanted box's intersection with each saved chunk, so a
// checkpoint written under one layout reads into any other (PyTorch DCP's model).
//
// The data of a box is its elements in row-major order over its extent, contiguous. Three
// layouts' pieces are boxes with contiguous data: a whole tensor, a row range of a tensor
// split on dim 0 (tp's column-parallel parts), a tensor split on a later dim held as its own
// tensor (row-parallel parts); and a flat element range (a ZeRO shard) is a few boxes, each
// contiguous (flat_range_boxes).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/parameter.h"

namespace dt::io {

struct Box {
  std::vector<int64_t> offset, extent;
  int64_t numel() const;
  std::string str() const;  // "[0:4, 8:16]"
  bool operator==(const Box& o) const { return offset == o.offset && extent == o.extent; }
};

// The box of a whole tensor of `shape`.
Box whole_box(const Shape& shape);
// True when a and b share an element; then *out (optional) is their intersection.
bool intersect(const Box& a, const Box& b, Box* out = nullptr);
// True when `inner` lies inside `outer`.
bool contains(const Box& outer, const Box& inner);
// Copies `region` (inside both boxes) from src (data of box `src_box`) to dst (data of box
// `dst_box`); elem: bytes per element.
void copy_region(const void* src, const Box& src_box, void* dst, const Box& dst_box, const Box& region, size_t elem);

// The elements [begin, end) of a row-major tensor of `shape`, as boxes in flat order: each
// box's data is a contiguous run of the flat range (at most 2 per dim plus one).
std::vector<Box> flat_range_boxes(const Shape& shape, int64_t begin, int64_t end);

// A split tensor's part, as (whole box, part box) pairs: rank `rank` of `size` holding the
// part that spec cuts out of a whole of `whole_shape` (nn/tensor_parallel.h: its segments,
// replicas and padding; rows of padding belong to no whole box). A replicated spec: one
// pair, both the whole.
struct PartBox {
  Box whole, part;
};
std::vector<PartBox> part_boxes(const nn::ShardSpec& spec, const Shape& whole_shape, int rank, int size);

}  // namespace dt::io
