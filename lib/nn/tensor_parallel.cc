#include "nn/tensor_parallel.h"

#include <algorithm>
#include <cstring>

#include "core/device_scope.h"
#include "core/error.h"
#include "core/tensor_copy.h"
#include "core/trace.h"
#include "kernels/ops.h"

namespace dt::nn {
namespace {

// The segments of spec's dim in a whole of `extent` along it.
std::vector<int64_t> segments_of(const ShardSpec& spec, int64_t extent) {
  return spec.segments.empty() ? std::vector<int64_t>{extent} : spec.segments;
}

// Copies between a whole tensor and one rank's part, both on the host: for every index
// before the split dim, every segment's part, as one contiguous run of bytes. A padded
// split's part is ceil(extent / size) rows, of which those past the whole's end are
// padding: zeroed in the part, never written to the whole.
void move_part(const ShardSpec& spec, int rank, int size, const Shape& whole_shape, char* whole, char* part,
               size_t elem, bool to_part) {
  const int d = spec.dim;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < d; ++i) outer *= whole_shape[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(d) + 1; i < whole_shape.size(); ++i) inner *= whole_shape[i];
  const int64_t extent = whole_shape[static_cast<size_t>(d)];
  const int64_t local = shard_shape("move_part", whole_shape, spec, size)[static_cast<size_t>(d)];
  const std::vector<int64_t> segs = spec.pad ? std::vector<int64_t>{local * size} : segments_of(spec, extent);
  const size_t row = static_cast<size_t>(inner) * elem;
  for (int64_t o = 0; o < outer; ++o) {
    int64_t seg_begin = 0, part_at = 0;
    for (size_t k = 0; k < segs.size(); ++k) {
      const int64_t seg = segs[k], reps = spec.replicas_of(k), parts = size / reps;
      const int64_t n = seg / parts, first = seg_begin + (rank / reps) * n;
      const int64_t real = std::max<int64_t>(0, std::min(n, extent - first));  // rows inside the whole
      char* w = whole + static_cast<size_t>(o * extent + first) * row;
      char* p = part + static_cast<size_t>(o * local + part_at) * row;
      if (to_part) {
        if (real > 0) std::memcpy(p, w, static_cast<size_t>(real) * row);
        if (real < n) std::memset(p + static_cast<size_t>(real) * row, 0, static_cast<size_t>(n - real) * row);
      } else if (real > 0) {
        std::memcpy(w, p, static_cast<size_t>(real) * row);
      }
      seg_begin += seg;
      part_at += n;
    }
  }
}

}  // namespace

void shard_parameter(Parameter& p, const ShardSpec& spec, const TpGroup& tp) {
  if (tp.size() == 1) return;  // the part of one rank is the whole, replicated
  const Shape whole = p.value.shape();
  p.spec = spec;
  p.value = take_shard(p.value, spec, tp.rank(), tp.size(), MemTag::Param);
  p.shape = p.value.shape();
  p.grad = Tensor::zeros(p.shape, p.value.dtype(), p.value.device(), MemTag::Grad);
  p.norm_weight_runs.clear();
  if (spec.segment_replicas.empty()) return;
  DT_CHECK(spec.dim == 0, p.name + ": replicated segments split dim 0 only");
  const int64_t row = p.value.numel() / p.shape[0];
  const std::vector<int64_t> segs = segments_of(spec, whole[0]);
  for (size_t k = 0; k < segs.size(); ++k) {
    const int64_t reps = spec.replicas_of(k);
    p.norm_weight_runs.emplace_back(segs[k] * reps / tp.size() * row, 1.0 / static_cast<double>(reps));
  }
}

void add_grad_squares(const Parameter& p, const Tensor& flat, int64_t begin, double& split, double& replicated) {
  if (p.spec.replicated()) {
    replicated += kernels::sum_squares(flat);
    return;
  }
  if (p.norm_weight_runs.empty()) {
    split += kernels::sum_squares(flat);
    return;
  }
  const Tensor f = flat.reshape({flat.numel()});
  const int64_t end = begin + flat.numel();
  int64_t at = 0;
  for (auto [n, w] : p.norm_weight_runs) {
    const int64_t b = std::max(begin, at), e = std::min(end, at + n);
    if (b < e) split += w * kernels::sum_squares(f.slice0(b - begin, e - begin));
    at += n;
  }
}

namespace {
// shard_parameter of a parameter being built.
Parameter shard_param(Parameter p, const ShardSpec& spec, const TpGroup& tp) {
  shard_parameter(p, spec, tp);
  return p;
}
}  // namespace

Shape shard_shape(const std::string& name, const Shape& whole, const ShardSpec& spec, int size) {
  if (spec.replicated()) return whole;
  DT_CHECK(spec.dim < static_cast<int>(whole.size()),
           name + ": split dim " + std::to_string(spec.dim) + " of a " + std::to_string(whole.size()) + "-d tensor");
  const int64_t extent = whole[static_cast<size_t>(spec.dim)];
  if (spec.pad) {
    DT_CHECK(spec.segments.empty(), name + ": a padded split has one segment");
    Shape s = whole;
    s[static_cast<size_t>(spec.dim)] = (extent + size - 1) / size;
    return s;
  }
  int64_t total = 0, local = 0;
  const std::vector<int64_t> segs = segments_of(spec, extent);
  for (size_t k = 0; k < segs.size(); ++k) {
    const int64_t seg = segs[k], reps = spec.replicas_of(k);
    DT_CHECK(reps >= 1 && size % reps == 0, name + ": segment " + std::to_string(k) + " held by " +
                                                std::to_string(reps) + " ranks each, which does not divide " +
                                                spec.axis + " = " + std::to_string(size));
    const int64_t parts = size / reps;
    DT_CHECK(seg % parts == 0, name + ": " + std::to_string(seg) + " features (dim " + std::to_string(spec.dim) +
                                   ") do not split evenly over " + spec.axis + " = " + std::to_string(size) +
                                   "; accepted: a " + spec.axis + " size that divides " + std::to_string(seg));
    total += seg;
    local += seg / parts;
  }
  DT_CHECK(total == extent, name + ": segments sum to " + std::to_string(total) + ", dim " + std::to_string(spec.dim) +
                                " is " + std::to_string(extent));
  Shape s = whole;
  s[static_cast<size_t>(spec.dim)] = local;
  return s;
}

Tensor take_shard(const Tensor& whole, const ShardSpec& spec, int rank, int size, MemTag tag) {
  const Shape shape = shard_shape("take_shard", whole.shape(), spec, size);
  Tensor part = Tensor::uninit(shape, whole.dtype(), whole.device(), tag);
  if (spec.replicated()) {
    copy_tensor(whole, part);
    return part;
  }
  // On the host: a shard is made once (at build or load), never in a step.
  Tensor w = to_device(whole, Device::cpu());
  Tensor p = part.device() == Device::cpu() ? part : Tensor::uninit(shape, whole.dtype());
  move_part(spec, rank, size, whole.shape(), static_cast<char*>(w.raw()), static_cast<char*>(p.raw()),
            dtype_size(whole.dtype()), true);
  if (p.raw() != part.raw()) copy_tensor(p, part);
  return part;
}

void place_shard(const Tensor& part, const ShardSpec& spec, int rank, int size, Tensor& whole) {
  DT_CHECK(part.shape() == shard_shape("place_shard", whole.shape(), spec, size) && part.dtype() == whole.dtype(),
           "place_shard: the part " + shape_str(part.shape()) + " is not a " + spec.str() + " part of " +
               shape_str(whole.shape()));
  if (spec.replicated()) {
    copy_tensor(part, whole);
    return;
  }
  Tensor p = to_device(part, Device::cpu());
  Tensor w = whole.device() == Device::cpu() ? whole : to_device(whole, Device::cpu());
  move_part(spec, rank, size, whole.shape(), static_cast<char*>(w.raw()), static_cast<char*>(p.raw()),
            dtype_size(whole.dtype()), false);
  if (w.raw() != whole.raw()) copy_tensor(w, whole);
}

namespace {
// Each tp collective as a span on its rank's comm track (dtrain train --trace): they block
// the layer that calls them, so the compute track shows the gap and this names it.
class TracedCollective {
 public:
  TracedCollective(const char* kind, const Tensor& t) : kind_(kind), bytes_(0), start_(-1.0) {
    if (!trace_enabled()) return;
    bytes_ = t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
    start_ = trace_now_us();
  }
  ~TracedCollective() {
    if (start_ >= 0 && trace_enabled())
      trace_record("comm", std::string("tp ") + kind_ + " (" + std::to_string(bytes_) + " B)",
                   trace_track(trace_current_rank(), true), start_, trace_now_us());
  }
  TracedCollective(const TracedCollective&) = delete;
  TracedCollective& operator=(const TracedCollective&) = delete;

 private:
  const char* kind_;
  int64_t bytes_;
  double start_;
};
}  // namespace

void all_reduce_sum(const TpGroup& tp, Tensor& t) {
  if (tp.size() == 1) return;
  TracedCollective span("all_reduce", t);
  tp.comm->all_reduce(t.raw(), t.raw(), t.numel(), t.dtype(), comm::ReduceOp::Sum);
}

namespace {
// The rows of this rank's token share of a whole of `rows` rows.
int64_t share_rows(const TpGroup& tp, int64_t rows) {
  DT_CHECK(rows % tp.size() == 0, "sequence parallel: " + std::to_string(rows) +
                                      " tokens (batch x sequence) do not split over tp = " +
                                      std::to_string(tp.size()) + "; accepted: a batch whose B x T divides by " +
                                      std::to_string(tp.size()));
  return rows / tp.size();
}
}  // namespace

Tensor gather_tokens(const TpGroup& tp, const Tensor& local, const Shape& whole, Tensor* into) {
  if (!tp.sp()) return local.reshape(whole);
  DT_ASSERT(into || tp.buffers);
  Tensor& buf = ensure(into ? *into : tp.buffers->gathered, whole, local.dtype());
  DT_CHECK(buf.numel() == local.numel() * tp.size(), "gather_tokens: " + shape_str(local.shape()) +
                                                         " is not one of " + std::to_string(tp.size()) +
                                                         " shares of " + shape_str(whole));
  TracedCollective span("all_gather", buf);
  tp.comm->all_gather(local.raw(), buf.raw(), local.numel(), local.dtype());
  return buf;
}

Tensor& partial_buffer(const TpGroup& tp, const Shape& whole, DType dtype, Tensor& out) {
  if (!tp.sp()) {
    // The caller's buffer may view the same elements in another shape ([B, T, C] or
    // [B T, C]): keep it rather than reallocate every call.
    int64_t n = 1;
    for (int64_t d : whole) n *= d;
    if (out.defined() && out.numel() == n && out.dtype() == dtype && out.device() == current_device()) return out;
    return ensure(out, whole, dtype);
  }
  Shape mine = whole;
  if (mine.size() == 3) mine = {whole[0] * whole[1], whole[2]};  // [B, T, C]: a share is rows of [B T, C]
  mine[0] = share_rows(tp, mine[0]);
  ensure(out, mine, dtype);
  DT_ASSERT(tp.buffers);
  return ensure(tp.buffers->partial, whole, dtype);
}

void sum_partial(const TpGroup& tp, Tensor& partial, Tensor& out) {
  if (!tp.sp()) {
    DT_ASSERT(partial.raw() == out.raw());
    all_reduce_sum(tp, out);
    return;
  }
  DT_ASSERT(partial.numel() == out.numel() * tp.size());
  TracedCollective span("reduce_scatter", partial);
  tp.comm->reduce_scatter(partial.raw(), out.raw(), out.numel(), out.dtype(), comm::ReduceOp::Sum);
}

Tensor local_tokens(const TpGroup& tp, const Tensor& whole) {
  if (!tp.sp()) return whole;
  const Tensor rows = flat2d(whole);
  const int64_t n = share_rows(tp, rows.rows());
  return rows.slice0(tp.rank() * n, (tp.rank() + 1) * n);
}

// ---- ColumnParallelLinear --------------------------------------------------------------------
ColumnParallelLinear::ColumnParallelLinear(const std::string& name, int64_t in_, int64_t out_, bool has_bias,
                                           uint64_t seed, float std, DType dtype, TpGroup tp_,
                                           std::vector<int64_t> segments, std::vector<int64_t> replicas)
    : in(in_), out(out_), tp(tp_) {
  ShardSpec spec{0, "tp", std::move(segments), false};
  for (int64_t r : replicas)  // all 1: the plain split (a spec that says nothing more)
    if (r > 1) spec.segment_replicas = replicas;
  out_local = shard_shape(name + ".weight", {out, in}, spec, tp.size())[0];
  // The single-rank parameters, then this rank's part of them.
  weight = shard_param(make_param(name + ".weight", {out, in}, Parameter::Init::Normal, std, seed, dtype), spec, tp);
  if (has_bias)
    bias = shard_param(make_param(name + ".bias", {out}, Parameter::Init::Zeros, 0.0f, seed, dtype), spec, tp);
}

void ColumnParallelLinear::collect(ParamList& list) {
  list.push_back(&weight);
  if (!bias.name.empty()) list.push_back(&bias);
}

void ColumnParallelLinear::forward(const Tensor& x, Tensor& y, bool with_bias) {
  ensure(y, {x.rows(), out_local}, x.dtype());
  linear_forward(flat2d(x), weight.value, with_bias ? bias.value : Tensor(), y);
}

void ColumnParallelLinear::backward(const Tensor& x, const Tensor& dy, Tensor& dx, bool with_bias) {
  // Each rank's dx is the part its output features contribute: summed over tp.
  Tensor& part = partial_buffer(tp, {x.rows(), in}, x.dtype(), dx);
  Tensor part2 = flat2d(part);
  Tensor no_bias;
  linear_backward(flat2d(dy), flat2d(x), weight.value, part2, false, weight.grad, with_bias ? bias.grad : no_bias);
  sum_partial(tp, part, dx);
}

// ---- RowParallelLinear -----------------------------------------------------------------------
RowParallelLinear::RowParallelLinear(const std::string& name, int64_t in_, int64_t out_, bool has_bias,
                                     uint64_t seed, float std, DType dtype, TpGroup tp_)
    : in(in_), out(out_), tp(tp_) {
  const ShardSpec spec{1, "tp", {}, false};
  in_local = shard_shape(name + ".weight", {out, in}, spec, tp.size())[1];
  weight = shard_param(make_param(name + ".weight", {out, in}, Parameter::Init::Normal, std, seed, dtype), spec, tp);
  if (has_bias) bias = make_param(name + ".bias", {out}, Parameter::Init::Zeros, 0.0f, seed, dtype);
}

void RowParallelLinear::collect(ParamList& list) {
  list.push_back(&weight);
  if (!bias.name.empty()) list.push_back(&bias);
}

void RowParallelLinear::forward(const Tensor& x, Tensor& y) {
  Tensor& part = partial_buffer(tp, {x.rows(), out}, x.dtype(), y);
  linear_forward(flat2d(x), weight.value, Tensor(), part);  // this rank's partial sum
  sum_partial(tp, part, y);
  if (bias.value.defined()) kernels::bias_add(y, bias.value);  // once, after the sum
}

void RowParallelLinear::backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  Tensor dx2 = dx.defined() ? flat2d(dx) : Tensor();
  // dy (gathered under SP) is whole on every rank, so the bias gradient is the same
  // everywhere: no collective.
  const Tensor dyw = gather_tokens(tp, flat2d(dy), {x.rows(), out});
  linear_backward(dyw, flat2d(x), weight.value, dx2, false, weight.grad, bias.grad);
}

}  // namespace dt::nn
