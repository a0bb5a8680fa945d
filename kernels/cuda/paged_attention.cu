// Causal attention over a paged KV cache, and the cache write, on CUDA (contracts in
// kernels/ops.h). The attention is attention.cu's prefill kernel with one change: a key's
// row is found through the sequence's block table instead of at a fixed stride, so each
// lane looks up the address of its own key and the value pass broadcasts those addresses.
// One warp per (query row, head) walks keys 0 .. L - n + j in tiles of 32 from key 0 with
// an online softmax, in the same order and arithmetic as prefill_kernel, so a query should
// match attention_forward's unsplit path over its keys held contiguously.
//
// seqs and tables stay on the device and nothing is read back (no host sync, so a serving
// step stays asynchronous): a small kernel first maps every row of q to the sequence that
// covers it, and the attention grid then runs over the N rows of q exactly.
// Not done: flash-decoding (splitting a long context over several warps, as attention.cu
// does for few rows), which would need the context lengths on the host to size the split.
#include "kernels/cuda/attention_common.cuh"

namespace dt::kernels::cuda {
namespace attn {
namespace paged {  // its own namespace: unity builds may batch this file with attention.cu
namespace {

struct PagedDims {
  int64_t hq, hkv, group, block_size, max_blocks;
  int d;
  float scale;
  __device__ int64_t qrow(int64_t i, int64_t h) const { return (i * hq + h) * d; }
  // Element offset in k_cache / v_cache of key position p of kv head g, via the block table.
  __device__ int64_t kv_row(const int32_t* table, int64_t p, int64_t g) const {
    int64_t block = table[p / block_size];
    return ((block * block_size + p % block_size) * hkv + g) * d;
  }
};

// rowmap[first + j] = s + 1 for the n query rows of sequence s (blockIdx.x); rows no
// sequence covers keep 0 (the buffer is zeroed first) and are left untouched in out.
__global__ void map_rows_kernel(const int32_t* seqs, int32_t* rowmap) {
  int64_t s = blockIdx.x, first = seqs[3 * s], n = seqs[3 * s + 1];
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) rowmap[first + j] = static_cast<int32_t>(s + 1);
}

// add_weighted_rows for scattered rows: lane r holds the weight w and the element offset
// `off` of row r of the tile (n rows), both broadcast in turn.
template <class T>
__device__ __forceinline__ void add_weighted_paged(float (&acc)[kPerLane], float w, const T* base, int64_t off, int n,
                                                   int d) {
  int lane = threadIdx.x & 31;
  for (int r = 0; r < n; ++r) {
    float wr = __shfl_sync(0xffffffffu, w, r);
    const T* row = base + __shfl_sync(0xffffffffu, static_cast<long long>(off), r);
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      int e = lane + 32 * t;
      if (e < d) acc[t] += wr * ld(row[e]);
    }
  }
}

// grid (ceil(N / kWarps), Hq): warp w of block x takes row i = x * kWarps + w of q, head
// blockIdx.y. Every branch that returns is taken by the whole warp (i and h are per warp).
template <class T>
__global__ void paged_kernel(PagedDims s, int64_t rows, const int32_t* rowmap, const int32_t* seqs,
                             const int32_t* tables, const T* q, const T* kc, const T* vc, T* out) {
  __shared__ float qs_all[kWarps][kMaxD];
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int64_t i = blockIdx.x * int64_t(kWarps) + warp, h = blockIdx.y;
  if (i >= rows) return;
  int64_t sq = rowmap[i] - 1;
  if (sq < 0) return;  // a row of q that no sequence covers
  int64_t first = seqs[3 * sq], n = seqs[3 * sq + 1], len = seqs[3 * sq + 2];
  int64_t kend = len - n + (i - first) + 1;  // causal: keys [0, kend), kend >= 1
  const int32_t* table = tables + sq * s.max_blocks;
  float* qs = qs_all[warp];
  load_row(q + s.qrow(i, h), s.d, qs);
  int64_t g = h / s.group;
  float m = -INFINITY, l = 0.0f, acc[kPerLane] = {};
  for (int64_t j0 = 0; j0 < kend; j0 += 32) {
    int64_t j = j0 + lane;
    int64_t off = j < kend ? s.kv_row(table, j, g) : 0;  // this lane's key (and value) row
    float sc = j < kend ? dot_row(qs, kc + off, s.d) * s.scale : -INFINITY;
    float mnew = fmaxf(m, warp_max(sc));  // finite: lane 0's key is always in range
    float p = j < kend ? expf(sc - mnew) : 0.0f, corr = expf(m - mnew);
    l = l * corr + warp_sum(p);
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) acc[t] *= corr;
    int nk = kend - j0 < 32 ? static_cast<int>(kend - j0) : 32;
    add_weighted_paged(acc, p, vc, off, nk, s.d);
    m = mnew;
  }
  store_dims(acc, 1.0f / l, out + s.qrow(i, h), s.d);
}

// Element i of k (and v), [N, Hkv * D] flattened, to row slots[i / c] of the caches.
template <class T> struct CacheWrite {
  const int32_t* slots;
  const T *k, *v;
  T *kc, *vc;
  int64_t c;  // Hkv * D: one cache slot
  __device__ void operator()(int64_t i) const {
    int64_t dst = static_cast<int64_t>(slots[i / c]) * c + i % c;
    kc[dst] = k[i];
    vc[dst] = v[i];
  }
};

}  // namespace
}  // namespace paged
}  // namespace attn

void paged_attention_forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& seqs,
                             const Tensor& tables, float scale, Tensor& out) {
  using namespace attn;
  using namespace attn::paged;
  int64_t hq = q.dim(1), hkv = k_cache.dim(2);
  PagedDims s{hq, hkv, hq / hkv, k_cache.dim(1), tables.dim(1), static_cast<int>(q.dim(2)), scale};
  if (s.scale <= 0.0f) s.scale = 1.0f / sqrtf(static_cast<float>(s.d));
  if (s.d > kMaxD)
    fail(DT_ERR_UNSUPPORTED, "paged_attention_forward: head dim " + std::to_string(s.d) + " on CUDA; accepted: <= " +
                                 std::to_string(kMaxD));
  int64_t rows = q.dim(0), nseq = seqs.dim(0);
  if (rows == 0 || nseq == 0 || hq == 0) return;  // nothing to attend; a grid of no blocks is a launch error
  Device dev = q.device();
  cudaStream_t st = stream_of(dev);
  Tensor rowmap = Tensor::uninit({rows}, DType::I32, dev);
  gpu::memset_zero(dev.index, rowmap.raw(), rowmap.nbytes());  // on the compute stream, as the kernels
  map_rows_kernel<<<static_cast<unsigned>(nseq), 128, 0, st>>>(ptr<int32_t>(seqs), ptr<int32_t>(rowmap));
  with_float(q.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dim3 grid(static_cast<unsigned>((rows + kWarps - 1) / kWarps), static_cast<unsigned>(hq));
    paged_kernel<T><<<grid, 32 * kWarps, 0, st>>>(s, rows, ptr<int32_t>(rowmap), ptr<int32_t>(seqs),
                                                  ptr<int32_t>(tables), ptr<T>(q), ptr<T>(k_cache),
                                                  ptr<T>(v_cache), ptr<T>(out));
  });
  check_launch("paged_attention_forward");
}

void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_cache, Tensor& v_cache) {
  int64_t c = k.dim(1) * k.dim(2);  // Hkv * D: one cache slot
  with_float(k.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(k.device(), k.numel(),
               attn::paged::CacheWrite<T>{ptr<int32_t>(slots), ptr<T>(k), ptr<T>(v), ptr<T>(k_cache), ptr<T>(v_cache), c},
               "kv_cache_write");
  });
}

}  // namespace dt::kernels::cuda
