// reduce on CUDA: dst[i] = op(srcs[0][i], ..., srcs[n-1][i]), folded in source order in
// f32 (int64 for integers, wrapping as two's complement), rounded once; each element is
// read from every source before it is written, so dst may alias srcs[0]. The source
// pointers travel in the kernel's parameters, up to kMaxSources of them.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/update_rules.h"

namespace dt::kernels::cuda {
namespace {

constexpr int kMaxSources = 64;

struct Sources {
  const void* p[kMaxSources];
};

template <class T> using Acc = rules::ReduceAcc<T>;

template <class T> __device__ __forceinline__ Acc<T> load(T x) {
  if constexpr (std::is_integral_v<T>) return x;
  else return ld(x);
}
template <class T> __device__ __forceinline__ T store(Acc<T> x) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(x);
  else return st<T>(x);
}
using rules::combine;

template <class T, ReduceOp OP> __global__ void reduce_kernel(Sources srcs, int nsrc, T* dst, int64_t count) {
  DT_GRID_STRIDE(i, count) {
    Acc<T> acc = load(static_cast<const T*>(srcs.p[0])[i]);
    for (int s = 1; s < nsrc; ++s) acc = combine<OP>(acc, load(static_cast<const T*>(srcs.p[s])[i]));
    if constexpr (OP == ReduceOp::Avg) acc = acc / static_cast<Acc<T>>(nsrc);
    dst[i] = store<T>(acc);
  }
}

template <class T> void launch(ReduceOp op, const Sources& s, int nsrc, void* dst, int64_t count, cudaStream_t st) {
  T* out = static_cast<T*>(dst);
  unsigned g = grid_for(count);
  switch (op) {
    case ReduceOp::Sum: reduce_kernel<T, ReduceOp::Sum><<<g, kThreads, 0, st>>>(s, nsrc, out, count); break;
    case ReduceOp::Avg: reduce_kernel<T, ReduceOp::Avg><<<g, kThreads, 0, st>>>(s, nsrc, out, count); break;
    case ReduceOp::Max: reduce_kernel<T, ReduceOp::Max><<<g, kThreads, 0, st>>>(s, nsrc, out, count); break;
    case ReduceOp::Min: reduce_kernel<T, ReduceOp::Min><<<g, kThreads, 0, st>>>(s, nsrc, out, count); break;
    case ReduceOp::Prod: reduce_kernel<T, ReduceOp::Prod><<<g, kThreads, 0, st>>>(s, nsrc, out, count); break;
  }
}

}  // namespace

void reduce(ReduceOp op, DType dtype, Device device, const void* const* srcs, int nsrc, void* dst, int64_t count) {
  if (nsrc > kMaxSources)
    fail(DT_ERR_UNSUPPORTED, "reduce: nsrc is " + std::to_string(nsrc) + "; CUDA reduces at most " +
                                 std::to_string(kMaxSources) + " sources per call");
  if (count == 0) return;
  Sources s{};
  for (int i = 0; i < nsrc; ++i) s.p[i] = srcs[i];
  cudaStream_t st = stream_of(device);
  with_any(dtype, [&](auto tag) { launch<typename decltype(tag)::type>(op, s, nsrc, dst, count, st); });
  check_launch("reduce");
}

}  // namespace dt::kernels::cuda
