// Fused causal attention backward on CUDA, recomputing each probability from the saved
// lse: P = exp(S - lse). Three kernels, each a warp per row (attention_common.cuh), no
// atomics, so every gradient element is summed in one fixed order:
//   delta: D_i = dout_i . out_i for every query row;
//   dq:    a warp per query row i: dq_i = scale * sum_j dS_ij k_j over the keys it sees;
//   dkv:   a warp per key row j of kv head g: over the query heads reading g and the
//          queries that see j, dv_j = sum_i P_ij dout_i and dk_j = scale * sum_i dS_ij q_i;
// with dS_ij = P_ij (dout_i . v_j - D_i).
#include "kernels/cuda/attention_common.cuh"

namespace dt::kernels::cuda {
namespace attn {
namespace {

// grid (ceil(rows / kWarps)): row = stat index (bi, h, i).
template <class T> __global__ void delta_kernel(Dims s, const T* out, const T* dout, float* delta) {
  int lane = threadIdx.x & 31;
  int64_t row = blockIdx.x * int64_t(kWarps) + (threadIdx.x >> 5);
  if (row >= s.b * s.hq * s.tq) return;
  int64_t i = row % s.tq, h = (row / s.tq) % s.hq, bi = row / (s.tq * s.hq);
  const T *o = out + s.qrow(bi, i, h), *d = dout + s.qrow(bi, i, h);
  float acc = 0.0f;
  for (int e = lane; e < s.d; e += 32) acc += ld(o[e]) * ld(d[e]);
  acc = warp_sum(acc);
  if (lane == 0) delta[row] = acc;
}

// grid (ceil(Tq / kWarps), Hq, B).
template <class T>
__global__ void dq_kernel(Dims s, const T* q, const T* k, const T* v, const T* dout, const float* lse,
                          const float* delta, T* dq) {
  __shared__ float qs_all[kWarps][kMaxD], ds_all[kWarps][kMaxD];
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int64_t i = blockIdx.x * int64_t(kWarps) + warp, h = blockIdx.y, bi = blockIdx.z;
  if (i >= s.tq) return;
  float *qs = qs_all[warp], *dos = ds_all[warp];
  load_row(q + s.qrow(bi, i, h), s.d, qs);
  load_row(dout + s.qrow(bi, i, h), s.d, dos);
  int64_t g = h / s.group(), ks = s.kstride(), kend = s.key_end(i);
  const T *kb = k + s.krow(bi, 0, g), *vb = v + s.krow(bi, 0, g);
  float li = lse[s.stat(bi, h, i)], di = delta[s.stat(bi, h, i)], acc[kPerLane] = {};
  for (int64_t j0 = 0; j0 < kend; j0 += 32) {
    int64_t j = j0 + lane;
    float ds = 0.0f;
    if (j < kend) {
      float p = expf(dot_row(qs, kb + j * ks, s.d) * s.scale - li);
      ds = p * (dot_row(dos, vb + j * ks, s.d) - di);
    }
    int n = kend - j0 < 32 ? static_cast<int>(kend - j0) : 32;
    add_weighted_rows(acc, ds, kb + j0 * ks, ks, n, s.d);
  }
  store_dims(acc, s.scale, dq + s.qrow(bi, i, h), s.d);
}

// grid (ceil(Tk / kWarps), Hkv, B).
template <class T>
__global__ void dkv_kernel(Dims s, const T* q, const T* k, const T* v, const T* dout, const float* lse,
                           const float* delta, T* dk, T* dv) {
  __shared__ float ks_all[kWarps][kMaxD], vs_all[kWarps][kMaxD];
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int64_t j = blockIdx.x * int64_t(kWarps) + warp, g = blockIdx.y, bi = blockIdx.z;
  if (j >= s.tk) return;
  float *kr = ks_all[warp], *vr = vs_all[warp];
  load_row(k + s.krow(bi, j, g), s.d, kr);
  load_row(v + s.krow(bi, j, g), s.d, vr);
  int64_t qs = s.hq * s.d;  // between consecutive queries of one head
  int64_t first = j - (s.tk - s.tq);  // queries i >= first see key j
  if (first < 0) first = 0;
  float dk_acc[kPerLane] = {}, dv_acc[kPerLane] = {};
  for (int64_t h = g * s.group(); h < (g + 1) * s.group(); ++h) {
    const T *qb = q + s.qrow(bi, 0, h), *db = dout + s.qrow(bi, 0, h);
    for (int64_t i0 = first; i0 < s.tq; i0 += 32) {
      int64_t i = i0 + lane;
      float p = 0.0f, ds = 0.0f;
      if (i < s.tq) {
        p = expf(dot_row(kr, qb + i * qs, s.d) * s.scale - lse[s.stat(bi, h, i)]);
        ds = p * (dot_row(vr, db + i * qs, s.d) - delta[s.stat(bi, h, i)]);
      }
      int n = s.tq - i0 < 32 ? static_cast<int>(s.tq - i0) : 32;
      add_weighted_rows(dv_acc, p, db + i0 * qs, qs, n, s.d);
      add_weighted_rows(dk_acc, ds, qb + i0 * qs, qs, n, s.d);
    }
  }
  store_dims(dk_acc, s.scale, dk + s.krow(bi, j, g), s.d);
  store_dims(dv_acc, 1.0f, dv + s.krow(bi, j, g), s.d);
}

}  // namespace
}  // namespace attn

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& dout, float scale, Tensor& dq, Tensor& dk, Tensor& dv, bool /*causal*/) {
  using namespace attn;
  Dims s = dims_of(q, k, scale);
  if (s.d > kMaxD)
    fail(DT_ERR_UNSUPPORTED, "attention_backward: head dim " + std::to_string(s.d) + " on CUDA; accepted: <= " +
                                 std::to_string(kMaxD));
  cudaStream_t st = stream_of(q);
  int64_t rows = s.b * s.hq * s.tq;
  Tensor delta = Tensor::uninit({rows}, DType::F32, q.device());
  with_float(q.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    delta_kernel<T><<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), 32 * kWarps, 0, st>>>(
        s, ptr<T>(out), ptr<T>(dout), ptr<float>(delta));
    dim3 qgrid(static_cast<unsigned>((s.tq + kWarps - 1) / kWarps), static_cast<unsigned>(s.hq),
               static_cast<unsigned>(s.b));
    dq_kernel<T><<<qgrid, 32 * kWarps, 0, st>>>(s, ptr<T>(q), ptr<T>(k), ptr<T>(v), ptr<T>(dout), ptr<float>(lse),
                                              ptr<float>(delta), ptr<T>(dq));
    dim3 kgrid(static_cast<unsigned>((s.tk + kWarps - 1) / kWarps), static_cast<unsigned>(s.hkv),
               static_cast<unsigned>(s.b));
    dkv_kernel<T><<<kgrid, 32 * kWarps, 0, st>>>(s, ptr<T>(q), ptr<T>(k), ptr<T>(v), ptr<T>(dout), ptr<float>(lse),
                                               ptr<float>(delta), ptr<T>(dk), ptr<T>(dv));
  });
  check_launch("attention_backward");
}

}  // namespace dt::kernels::cuda
