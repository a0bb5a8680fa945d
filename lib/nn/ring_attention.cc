#include "nn/ring_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/trace.h"
#include "kernels/ops.h"

namespace dt::nn {

int64_t CpGroup::position(int64_t t, int64_t T) const {
  const int64_t c = T / 2;
  return t < c ? rank() * c + t : (2 * size() - 1 - rank()) * c + (t - c);
}

std::vector<int64_t> CpGroup::positions(int64_t T) const {
  std::vector<int64_t> out(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) out[static_cast<size_t>(t)] = position(t, T);
  return out;
}

int64_t ring_bytes_forward(int cp, int64_t B, int64_t T, int64_t hkv, int64_t d) {
  return static_cast<int64_t>(cp - 1) * 2 * B * T * hkv * d * static_cast<int64_t>(sizeof(float));
}

namespace {

// The cp communicator carries nothing else: one tag per kind of message, matched in order.
constexpr int kTagKv = 1, kTagGrad = 2;

Tensor f32_scratch(const Shape& s) { return Tensor::uninit(s, DType::F32, Device::cpu(), MemTag::Workspace); }
// The f32 view of t: itself when f32, else a widened copy.
Tensor widen(const Tensor& t) {
  if (t.dtype() == DType::F32) return t;
  Tensor w = f32_scratch(t.shape());
  kernels::cast(t, w);
  return w;
}
int64_t row_width(const Tensor& x) { return x.numel() / (x.dim(0) * x.dim(1)); }

// x[:, t0 : t0 + n] of an f32 [B, T, ...] tensor, as a new [B, n, ...] one.
Tensor take_rows(const Tensor& x, int64_t t0, int64_t n) {
  Shape s = x.shape();
  const int64_t B = s[0], T = s[1], W = row_width(x);
  s[1] = n;
  Tensor out = f32_scratch(s);
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(out.data<float>() + b * n * W, x.data<float>() + (b * T + t0) * W, static_cast<size_t>(n * W) * 4);
  return out;
}
// x[:, t0 : t0 + n] += part ([B, n, ...]).
void add_rows(Tensor& x, int64_t t0, const Tensor& part) {
  const int64_t B = x.dim(0), T = x.dim(1), n = part.dim(1), W = row_width(x);
  for (int64_t b = 0; b < B; ++b) {
    float* d = x.data<float>() + (b * T + t0) * W;
    const float* s = part.data<float>() + b * n * W;
    for (int64_t i = 0; i < n * W; ++i) d[i] += s[i];
  }
}
// lse[:, :, t0 : t0 + n] of [B, H, T].
Tensor take_lse(const Tensor& lse, int64_t t0, int64_t n) {
  const int64_t BH = lse.dim(0) * lse.dim(1), T = lse.dim(2);
  Tensor out = f32_scratch({lse.dim(0), lse.dim(1), n});
  for (int64_t r = 0; r < BH; ++r)
    std::memcpy(out.data<float>() + r * n, lse.data<float>() + r * T + t0, static_cast<size_t>(n) * 4);
  return out;
}

// Merges a partial result (po [B, n, H, D], pl [B, H, n]) into rows t0.. of (out, lse).
void merge(Tensor& out, Tensor& lse, int64_t t0, const Tensor& po, const Tensor& pl) {
  const int64_t B = out.dim(0), T = out.dim(1), H = out.dim(2), D = out.dim(3), n = po.dim(1);
  float *o = out.data<float>(), *l = lse.data<float>();
  const float *p = po.data<float>(), *q = pl.data<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < n; ++i) {
        float& la = l[(b * H + h) * T + t0 + i];
        const float lb = q[(b * H + h) * n + i], hi = std::max(la, lb);
        const float L = hi + std::log1p(std::exp(-std::fabs(la - lb)));
        const float wa = std::exp(la - L), wb = std::exp(lb - L);
        float* oa = o + ((b * T + t0 + i) * H + h) * D;
        const float* ob = p + ((b * n + i) * H + h) * D;
        for (int64_t e = 0; e < D; ++e) oa[e] = wa * oa[e] + wb * ob[e];
        la = L;
      }
}

// K and V of one rank packed in one f32 buffer [2, B, T, Hkv, D], so a step is one message.
Tensor pack_kv(const Tensor& k, const Tensor& v) {
  Shape s = k.shape();
  s.insert(s.begin(), 2);
  Tensor kv = f32_scratch(s);
  for (int i = 0; i < 2; ++i) {
    Tensor half = kv.slice0(i, i + 1).reshape(k.shape());
    kernels::cast(i == 0 ? k : v, half);
  }
  return kv;
}
Tensor half_of(const Tensor& kv, int i) {
  Shape s(kv.shape().begin() + 1, kv.shape().end());
  return kv.slice0(i, i + 1).reshape(s);
}

// A ring transfer in flight: sent right, received from the left; on the comm track of a
// trace from its posting to its completion (so the overlap with the step's attention shows).
class Pass {
 public:
  Pass() = default;
  Pass(comm::Communicator& c, const Tensor* send, Tensor* recv, int tag, const char* what) {
    const int n = c.size(), right = (c.rank() + 1) % n, left = (c.rank() + n - 1) % n;
    t0_ = trace_enabled() ? trace_now_us() : -1.0;
    const Tensor& t = send ? *send : *recv;
    name_ = std::string("cp ring ") + what + " (" + std::to_string(t.nbytes()) + " B)";
    if (send) send_ = c.send_async(send->raw(), send->numel(), DType::F32, right, tag);
    if (recv) recv_ = c.recv_async(recv->raw(), recv->numel(), DType::F32, left, tag);
  }
  ~Pass() { comm::wait_ignoring_errors(send_), comm::wait_ignoring_errors(recv_); }
  Pass(const Pass&) = delete;
  Pass& operator=(Pass&& o) noexcept {
    wait();
    std::swap(send_, o.send_), std::swap(recv_, o.recv_), std::swap(t0_, o.t0_), std::swap(name_, o.name_);
    return *this;
  }
  void wait() {
    if (send_) send_->wait();
    if (recv_) recv_->wait();
    if ((send_ || recv_) && t0_ >= 0)
      trace_record("comm", name_, trace_track(trace_current_rank(), true), t0_, trace_now_us());
    send_.reset(), recv_.reset();
  }

 private:
  comm::WorkPtr send_, recv_;
  double t0_ = -1.0;
  std::string name_;
};

void check_cp(const char* op, const CpGroup& cp, const Tensor& q) {
  DT_CHECK(q.device().type == DeviceType::CPU,
           std::string(op) + ": context parallelism on " + q.device().str() + ": not built yet; accepted: CPU ranks");
  DT_CHECK(q.ndim() == 4 && q.dim(1) % 2 == 0, std::string(op) + ": q has shape " + shape_str(q.shape()) +
                                                   "; required: [B, 2c, Hq, D], this rank's two chunks of c rows");
  DT_CHECK(cp.comm != nullptr, std::string(op) + ": a cp group is required");
}

}  // namespace

void ring_attention_forward(const CpGroup& cp, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                            Tensor& lse) {
  check_cp("ring_attention_forward", cp, q);
  comm::Communicator& c = *cp.comm;
  const int n = cp.size(), r = cp.rank();
  const int64_t B = q.dim(0), T = q.dim(1), half = T / 2, Hq = q.dim(2), D = q.dim(3);
  const Tensor q32 = widen(q);
  Tensor o32 = out.dtype() == DType::F32 ? out : f32_scratch(out.shape());
  Tensor kv[2] = {pack_kv(k, v), f32_scratch({2, B, T, k.dim(2), D})};
  Pass next(c, &kv[0], &kv[1], kTagKv, "kv");
  // Own chunks, in position order: the plain causal kernel is their attention.
  kernels::attention_forward(q32, half_of(kv[0], 0), half_of(kv[0], 1), 0.0f, o32, lse, true);
  for (int s = 1; s < n; ++s) {
    next.wait();
    const Tensor& cur = kv[s % 2];
    if (s + 1 < n) next = Pass(c, &cur, &kv[(s + 1) % 2], kTagKv, "kv");
    const int j = (r - s + n) % n;
    if (j < r) {  // chunk j precedes both local chunks: every query over its c keys
      Tensor po = f32_scratch({B, T, Hq, D}), pl = f32_scratch({B, Hq, T});
      kernels::attention_forward(q32, take_rows(half_of(cur, 0), 0, half), take_rows(half_of(cur, 1), 0, half), 0.0f,
                                 po, pl, false);
      merge(o32, lse, 0, po, pl);
    } else {  // both of j's chunks lie between the local ones: the later one sees them all
      Tensor po = f32_scratch({B, half, Hq, D}), pl = f32_scratch({B, Hq, half});
      kernels::attention_forward(take_rows(q32, half, half), half_of(cur, 0), half_of(cur, 1), 0.0f, po, pl, false);
      merge(o32, lse, half, po, pl);
    }
  }
  if (o32.raw() != out.raw()) kernels::cast(o32, out);
}

void ring_attention_backward(const CpGroup& cp, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                             const Tensor& lse, const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv) {
  check_cp("ring_attention_backward", cp, q);
  comm::Communicator& c = *cp.comm;
  const int n = cp.size(), r = cp.rank();
  const int64_t B = q.dim(0), T = q.dim(1), half = T / 2, Hq = q.dim(2), D = q.dim(3);
  const Shape kv_shape = {2, B, T, k.dim(2), D};
  const Tensor q32 = widen(q), o32 = widen(out), do32 = widen(dout);
  Tensor dq32 = dq.dtype() == DType::F32 ? dq : f32_scratch(dq.shape());
  Tensor kv[2] = {pack_kv(k, v), f32_scratch(kv_shape)};
  Tensor own = f32_scratch(kv_shape);  // this rank's dK, dV
  Pass next(c, &kv[0], &kv[1], kTagKv, "kv");
  {
    Tensor dk0 = half_of(own, 0), dv0 = half_of(own, 1);
    kernels::attention_backward(q32, half_of(kv[0], 0), half_of(kv[0], 1), o32, lse, do32, 0.0f, dq32, dk0, dv0, true);
  }
  // acc[i]: the dK/dV travelling with a visiting K/V; a buffer is reused two steps later,
  // once its send is done.
  Tensor acc[2] = {f32_scratch(kv_shape), f32_scratch(kv_shape)};
  Pass grad_in, grad_out[2];
  for (int s = 1; s < n; ++s) {
    next.wait();
    const Tensor& cur = kv[s % 2];
    if (s + 1 < n) next = Pass(c, &cur, &kv[(s + 1) % 2], kTagKv, "kv");
    Tensor& a = acc[s % 2];
    grad_out[s % 2].wait();
    // From step 2 the accumulator comes from the left, which added its share at step s - 1;
    // at step 1 the left is the owner, which keeps its share.
    if (s >= 2) grad_in = Pass(c, nullptr, &a, kTagGrad, "dkv");
    const int j = (r - s + n) % n;
    Tensor pk, pv;  // this rank's share of j's dK, dV (j < r: of its first chunk alone)
    if (j < r) {
      Tensor part_dq = f32_scratch({B, T, Hq, D});
      pk = f32_scratch({B, half, k.dim(2), D}), pv = f32_scratch(pk.shape());
      kernels::attention_backward(q32, take_rows(half_of(cur, 0), 0, half), take_rows(half_of(cur, 1), 0, half), o32,
                                  lse, do32, 0.0f, part_dq, pk, pv, false);
      add_rows(dq32, 0, part_dq);
    } else {
      Tensor part_dq = f32_scratch({B, half, Hq, D});
      pk = f32_scratch({B, T, k.dim(2), D}), pv = f32_scratch(pk.shape());
      kernels::attention_backward(take_rows(q32, half, half), half_of(cur, 0), half_of(cur, 1), take_rows(o32, half, half),
                                  take_lse(lse, half, half), take_rows(do32, half, half), 0.0f, part_dq, pk, pv, false);
      add_rows(dq32, half, part_dq);
    }
    if (s >= 2)
      grad_in.wait();
    else
      kernels::fill(a, 0.0f);
    Tensor ak = half_of(a, 0), av = half_of(a, 1);
    add_rows(ak, 0, pk);
    add_rows(av, 0, pv);
    grad_out[s % 2] = Pass(c, &a, nullptr, kTagGrad, "dkv");
  }
  if (n > 1) {  // this rank's dK/dV from every other rank, home from the left
    Tensor home = f32_scratch(kv_shape);
    Pass(c, nullptr, &home, kTagGrad, "dkv").wait();
    kernels::add(own, home, own);
  }
  for (Pass& p : grad_out) p.wait();
  if (dq32.raw() != dq.raw()) kernels::cast(dq32, dq);
  kernels::cast(half_of(own, 0), dk);
  kernels::cast(half_of(own, 1), dv);
}

}  // namespace dt::nn
