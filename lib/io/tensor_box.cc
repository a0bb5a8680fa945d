#include "io/tensor_box.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace dt::io {

int64_t Box::numel() const {
  int64_t n = 1;
  for (int64_t e : extent) n *= e;
  return n;
}

std::string Box::str() const {
  std::string s = "[";
  for (size_t d = 0; d < offset.size(); ++d)
    s += (d ? ", " : "") + std::to_string(offset[d]) + ":" + std::to_string(offset[d] + extent[d]);
  return s + "]";
}

Box whole_box(const Shape& shape) { return Box{std::vector<int64_t>(shape.size(), 0), shape}; }

bool intersect(const Box& a, const Box& b, Box* out) {
  DT_ASSERT(a.offset.size() == b.offset.size());
  Box r{a.offset, a.extent};
  for (size_t d = 0; d < a.offset.size(); ++d) {
    const int64_t lo = std::max(a.offset[d], b.offset[d]);
    const int64_t hi = std::min(a.offset[d] + a.extent[d], b.offset[d] + b.extent[d]);
    if (hi <= lo) return false;
    r.offset[d] = lo;
    r.extent[d] = hi - lo;
  }
  if (a.numel() == 0 || b.numel() == 0) return false;
  if (out) *out = r;
  return true;
}

bool contains(const Box& outer, const Box& inner) {
  if (outer.offset.size() != inner.offset.size()) return false;
  for (size_t d = 0; d < outer.offset.size(); ++d)
    if (inner.offset[d] < outer.offset[d] || inner.offset[d] + inner.extent[d] > outer.offset[d] + outer.extent[d])
      return false;
  return true;
}

void copy_region(const void* src, const Box& src_box, void* dst, const Box& dst_box, const Box& region, size_t elem) {
  DT_ASSERT(contains(src_box, region) && contains(dst_box, region));
  const size_t nd = region.offset.size();
  if (nd == 0) {
    std::memcpy(dst, src, elem);
    return;
  }
  // Row-major strides of both boxes; runs of the region's last dim are contiguous in both.
  std::vector<int64_t> ss(nd, 1), ds(nd, 1);
  for (size_t d = nd - 1; d > 0; --d) {
    ss[d - 1] = ss[d] * src_box.extent[d];
    ds[d - 1] = ds[d] * dst_box.extent[d];
  }
  const size_t run = static_cast<size_t>(region.extent[nd - 1]) * elem;
  std::vector<int64_t> idx(nd, 0);  // position within the region, last dim fixed at 0
  const int64_t rows = region.numel() / region.extent[nd - 1];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t so = 0, doff = 0;
    for (size_t d = 0; d < nd; ++d) {
      const int64_t g = region.offset[d] + idx[d];
      so += (g - src_box.offset[d]) * ss[d];
      doff += (g - dst_box.offset[d]) * ds[d];
    }
    std::memcpy(static_cast<char*>(dst) + static_cast<size_t>(doff) * elem,
                static_cast<const char*>(src) + static_cast<size_t>(so) * elem, run);
    for (size_t d = nd - 1; d-- > 0;) {  // next row: odometer over the leading dims
      if (++idx[d] < region.extent[d]) break;
      idx[d] = 0;
    }
  }
}

namespace {

// Appends the boxes of [begin, end) within dims [d, nd) of shape, the leading dims fixed by
// `prefix` (offsets, extent 1 each).
void flat_boxes(const Shape& shape, size_t d, std::vector<int64_t>& prefix, int64_t begin, int64_t end,
                std::vector<Box>& out) {
  if (begin >= end) return;
  const size_t nd = shape.size();
  auto emit = [&](int64_t row0, int64_t rows) {
    Box b;
    b.offset = prefix;
    b.extent.assign(prefix.size(), 1);
    b.offset.push_back(row0);
    b.extent.push_back(rows);
    for (size_t k = d + 1; k < nd; ++k) b.offset.push_back(0), b.extent.push_back(shape[k]);
    out.push_back(std::move(b));
  };
  int64_t stride = 1;
  for (size_t k = d + 1; k < nd; ++k) stride *= shape[k];
  int64_t first = begin / stride;
  const int64_t last_full = end / stride;  // rows before it may be whole
  if (begin % stride != 0) {  // a partial first row
    prefix.push_back(first);
    flat_boxes(shape, d + 1, prefix, begin % stride, std::min(end - first * stride, stride), out);
    prefix.pop_back();
    if (end <= (first + 1) * stride) return;
    ++first;
  }
  if (last_full > first) emit(first, last_full - first);
  if (end % stride != 0 && last_full >= first) {  // a partial last row
    prefix.push_back(last_full);
    flat_boxes(shape, d + 1, prefix, 0, end % stride, out);
    prefix.pop_back();
  }
}

}  // namespace

std::vector<Box> flat_range_boxes(const Shape& shape, int64_t begin, int64_t end) {
  std::vector<Box> out;
  if (shape.empty()) {
    if (begin < end) out.push_back(Box{});
    return out;
  }
  std::vector<int64_t> prefix;
  flat_boxes(shape, 0, prefix, begin, end, out);
  return out;
}

std::vector<PartBox> part_boxes(const nn::ShardSpec& spec, const Shape& whole_shape, int rank, int size) {
  if (spec.replicated() || size == 1) return {{whole_box(whole_shape), whole_box(whole_shape)}};
  const size_t d = static_cast<size_t>(spec.dim);
  DT_ASSERT(d < whole_shape.size());
  const int64_t extent = whole_shape[d];
  std::vector<int64_t> segs;
  int64_t local = 0;
  if (spec.pad) {
    local = (extent + size - 1) / size;
    segs = {local * size};
  } else {
    segs = spec.segments.empty() ? std::vector<int64_t>{extent} : spec.segments;
  }
  std::vector<PartBox> out;
  int64_t seg_begin = 0, part_at = 0;
  for (size_t k = 0; k < segs.size(); ++k) {
    const int64_t reps = spec.replicas_of(k), parts = size / reps, n = segs[k] / parts;
    const int64_t first = seg_begin + (rank / reps) * n;
    const int64_t real = std::max<int64_t>(0, std::min(n, extent - first));
    if (real > 0) {
      PartBox pb{whole_box(whole_shape), Box{}};
      pb.whole.offset[d] = first;
      pb.whole.extent[d] = real;
      pb.part = pb.whole;
      pb.part.offset[d] = part_at;
      out.push_back(pb);
    }
    seg_begin += segs[k];
    part_at += n;
  }
  return out;
}

}  // namespace dt::io
