// sum of squares on CUDA, in f64 (the global grad norm for clipping). A fixed grid of
// blocks each sums a fixed grid-stride share into one partial; one block then adds the
// partials in order. Deterministic, and Inf/NaN propagate. Synchronizes (returns a value).
#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda {
namespace {

constexpr int kBlocks = 512;

__device__ double block_sum_d(double v, double* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : 0.0;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <class T> __global__ void partial_kernel(const T* x, int64_t n, double* part) {
  __shared__ double scratch[32];
  double s = 0.0;
  DT_GRID_STRIDE(i, n) {
    double v = ld(x[i]);
    s += v * v;
  }
  s = block_sum_d(s, scratch);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}

__global__ void finish_kernel(const double* part, int n, double* out) {
  __shared__ double scratch[32];
  double s = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += part[i];
  s = block_sum_d(s, scratch);
  if (threadIdx.x == 0) *out = s;
}

}  // namespace

double sum_squares(const Tensor& x) {
  // kBlocks partials and the result, as f64 (I64 storage has the size and alignment).
  Tensor buf = Tensor::uninit({kBlocks + 1}, DType::I64, x.device());
  double* p = ptr<double>(buf);
  cudaStream_t s = stream_of(x);
  with_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    partial_kernel<T><<<kBlocks, kThreads, 0, s>>>(ptr<T>(x), x.numel(), p);
  });
  finish_kernel<<<1, kThreads, 0, s>>>(p, kBlocks, p + kBlocks);
  check_launch("sum_squares");
  double out = 0.0;
  gpu::copy_to_host(x.device().index, &out, p + kBlocks, sizeof out);
  return out;
}

}  // namespace dt::kernels::cuda
