// Fused causal attention forward on CUDA (see attention_common.cuh for the design).
// Prefill: one warp per query row over all the keys it may see. When there are few rows
// (decode: Tq = 1 over a long KV cache) the keys of each row are split into chunks that
// different warps attend in parallel, each leaving a partial (max, sum, weighted values),
// and a second kernel merges the partials (flash-decoding).
#include "kernels/cuda/attention_common.cuh"

namespace dt::kernels::cuda {
namespace attn {

Dims dims_of(const Tensor& q, const Tensor& k, float scale) {
  Dims s{q.dim(0), q.dim(1), k.dim(1), q.dim(2), k.dim(2), static_cast<int>(q.dim(3)), scale};
  if (s.scale <= 0.0f) s.scale = 1.0f / sqrtf(static_cast<float>(s.d));
  return s;
}

namespace {

// Attends keys [kbeg, kend) of one row, updating the running max m, sum l and acc.
template <class T>
__device__ void attend_keys(const Dims& s, const float* qs, const T* kbase, const T* vbase, int64_t kbeg, int64_t kend,
                            float& m, float& l, float (&acc)[kPerLane]) {
  int lane = threadIdx.x & 31;
  int64_t ks = s.kstride();
  for (int64_t j0 = kbeg; j0 < kend; j0 += 32) {
    int64_t j = j0 + lane;
    float sc = j < kend ? dot_row(qs, kbase + j * ks, s.d) * s.scale : -INFINITY;
    float mnew = fmaxf(m, warp_max(sc));  // finite: lane 0's key is always in range
    float p = j < kend ? expf(sc - mnew) : 0.0f, corr = expf(m - mnew);
    l = l * corr + warp_sum(p);
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) acc[t] *= corr;
    int n = kend - j0 < 32 ? static_cast<int>(kend - j0) : 32;
    add_weighted_rows(acc, p, vbase + j0 * ks, ks, n, s.d);
    m = mnew;
  }
}

// grid (ceil(Tq / kWarps), Hq, B): warp w of block x takes query row x * kWarps + w.
template <class T> __global__ void prefill_kernel(Dims s, const T* q, const T* k, const T* v, T* out, float* lse) {
  __shared__ float qs_all[kWarps][kMaxD];
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int64_t i = blockIdx.x * int64_t(kWarps) + warp, h = blockIdx.y, bi = blockIdx.z;
  if (i >= s.tq) return;
  float* qs = qs_all[warp];
  load_row(q + s.qrow(bi, i, h), s.d, qs);
  int64_t g = h / s.group();
  float m = -INFINITY, l = 0.0f, acc[kPerLane] = {};
  attend_keys(s, qs, k + s.krow(bi, 0, g), v + s.krow(bi, 0, g), 0, s.key_end(i), m, l, acc);
  store_dims(acc, 1.0f / l, out + s.qrow(bi, i, h), s.d);
  if (lane == 0) lse[s.stat(bi, h, i)] = m + logf(l);
}

// grid (ceil(nsplit / kWarps), Tq * Hq, B): warp w of block x takes chunk x * kWarps + w
// of the keys of row (i, h), chunk_len keys each. Partial layout per (row, chunk): m, l,
// then d weighted values.
template <class T>
__global__ void split_kernel(Dims s, const T* q, const T* k, const T* v, int nsplit, int64_t chunk_len, float* part) {
  __shared__ float qs_all[kWarps][kMaxD];
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int c = blockIdx.x * kWarps + warp;
  int64_t i = blockIdx.y / s.hq, h = blockIdx.y % s.hq, bi = blockIdx.z;
  if (c >= nsplit) return;
  float* qs = qs_all[warp];
  load_row(q + s.qrow(bi, i, h), s.d, qs);
  int64_t g = h / s.group(), kend = s.key_end(i), kbeg = c * chunk_len;
  int64_t kstop = kbeg + chunk_len < kend ? kbeg + chunk_len : kend;
  float m = -INFINITY, l = 0.0f, acc[kPerLane] = {};
  if (kbeg < kend) attend_keys(s, qs, k + s.krow(bi, 0, g), v + s.krow(bi, 0, g), kbeg, kstop, m, l, acc);
  float* p = part + (s.stat(bi, h, i) * nsplit + c) * (s.d + 2);
  if (lane == 0) {
    p[0] = m;
    p[1] = l;
  }
  store_dims(acc, 1.0f, p + 2, s.d);
}

// One warp per row: merges the row's partials, rescaling each by exp(m_c - max).
template <class T> __global__ void combine_kernel(Dims s, int nsplit, const float* part, T* out, float* lse) {
  int lane = threadIdx.x & 31;
  int64_t row = blockIdx.x * int64_t(kWarps) + (threadIdx.x >> 5);  // = stat index (bi, h, i)
  if (row >= s.b * s.hq * s.tq) return;
  int64_t i = row % s.tq, h = (row / s.tq) % s.hq, bi = row / (s.tq * s.hq);
  const float* p = part + row * nsplit * (s.d + 2);
  float mx = -INFINITY;
  for (int c = 0; c < nsplit; ++c) mx = fmaxf(mx, p[c * (s.d + 2)]);
  float l = 0.0f, acc[kPerLane] = {};
  for (int c = 0; c < nsplit; ++c) {
    const float* pc = p + c * (s.d + 2);
    if (pc[1] == 0.0f) continue;  // an empty chunk (past the causal limit)
    float w = expf(pc[0] - mx);
    l += pc[1] * w;
#pragma unroll
    for (int t = 0; t < kPerLane; ++t)
      if (lane + 32 * t < s.d) acc[t] += pc[2 + lane + 32 * t] * w;
  }
  store_dims(acc, 1.0f / l, out + s.qrow(bi, i, h), s.d);
  if (lane == 0) lse[row] = mx + logf(l);
}

// Chunks per row: enough warps in flight to fill a large GPU (about 4096), never chunks
// shorter than 64 keys, at most 64 chunks; 1 means no split.
int splits_for(const Dims& s) {
  int64_t rows = s.b * s.hq * s.tq;
  if (rows >= 4096 || s.tk < 128) return 1;
  int64_t want = (4096 + rows - 1) / rows, most = s.tk / 64;
  int64_t n = want < most ? want : most;
  return static_cast<int>(n < 1 ? 1 : (n > 64 ? 64 : n));
}

}  // namespace
}  // namespace attn

// causal = false is refused by the dispatcher (kernels/dispatch/attention.cc) before it comes here.
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out, Tensor& lse,
                       bool /*causal*/) {
  using namespace attn;
  Dims s = dims_of(q, k, scale);
  if (s.d > kMaxD)
    fail(DT_ERR_UNSUPPORTED, "attention_forward: head dim " + std::to_string(s.d) + " on CUDA; accepted: <= " +
                                 std::to_string(kMaxD));
  cudaStream_t st = stream_of(q);
  int nsplit = splits_for(s);
  with_float(q.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (nsplit == 1) {
      dim3 grid(static_cast<unsigned>((s.tq + kWarps - 1) / kWarps), static_cast<unsigned>(s.hq),
                static_cast<unsigned>(s.b));
      prefill_kernel<T><<<grid, 32 * kWarps, 0, st>>>(s, ptr<T>(q), ptr<T>(k), ptr<T>(v), ptr<T>(out), ptr<float>(lse));
      return;
    }
    int64_t rows = s.b * s.hq * s.tq, chunk = (s.tk + nsplit - 1) / nsplit;
    Tensor part = Tensor::uninit({rows * nsplit * (s.d + 2)}, DType::F32, q.device());
    dim3 grid(static_cast<unsigned>((nsplit + kWarps - 1) / kWarps), static_cast<unsigned>(s.tq * s.hq),
              static_cast<unsigned>(s.b));
    split_kernel<T><<<grid, 32 * kWarps, 0, st>>>(s, ptr<T>(q), ptr<T>(k), ptr<T>(v), nsplit, chunk, ptr<float>(part));
    combine_kernel<T><<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), 32 * kWarps, 0, st>>>(
        s, nsplit, ptr<float>(part), ptr<T>(out), ptr<float>(lse));
  });
  check_launch("attention_forward");
}

}  // namespace dt::kernels::cuda
