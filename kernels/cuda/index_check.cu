// find_bad_index (cuda_common.cuh): the first position whose id is outside [lo, hi) and is
// not `allowed`, found by an atomicMin over positions, and read back with one sync.
#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda {
namespace {

__global__ void bad_index_kernel(const int32_t* ids, int64_t n, int32_t lo, int32_t hi, int32_t allowed,
                                 unsigned long long* first) {
  DT_GRID_STRIDE(i, n) {
    int32_t v = ids[i];
    if (v != allowed && (v < lo || v >= hi)) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

}  // namespace

BadIndex find_bad_index(Device device, const int32_t* ids, int64_t n, int32_t lo, int32_t hi, int32_t allowed) {
  BadIndex out;
  if (n == 0) return out;
  Tensor first = Tensor::uninit({1}, DType::I64, device);
  unsigned long long none = ~0ull, pos = 0;
  gpu::copy_to_device(device.index, first.raw(), &none, sizeof none);
  bad_index_kernel<<<grid_for(n), kThreads, 0, stream_of(device)>>>(ids, n, lo, hi, allowed,
                                                                    ptr<unsigned long long>(first));
  check_launch("index check");
  gpu::copy_to_host(device.index, &pos, first.raw(), sizeof pos);
  if (pos == none) return out;
  out.pos = static_cast<int64_t>(pos);
  gpu::copy_to_host(device.index, &out.value, ids + pos, sizeof out.value);
  return out;
}

}  // namespace dt::kernels::cuda
