// Rotary position embedding on CUDA: the rotation of nn/rope.cc, whose cos/sin tables
// (computed on the host in double, so every device rotates by the same bits) are copied
// over and applied here, one thread per (row, pair).
#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda {
namespace {

template <class T> struct Rotate {
  T* x;
  const float *cs, *sn;
  int64_t t, h, half;
  __device__ void operator()(int64_t k) const {  // k = ((b * T + ti) * H + hi) * half + i
    int64_t i = k % half, row = k / half, ti = (row / h) % t;
    T* v = x + row * 2 * half;
    float c = cs[ti * half + i], s = sn[ti * half + i], x0 = ld(v[i]), x1 = ld(v[i + half]);
    v[i] = st<T>(x0 * c - x1 * s);
    v[i + half] = st<T>(x0 * s + x1 * c);
  }
};

}  // namespace

void rope_rotate(Tensor& x, const float* cos_table, const float* sin_table) {
  const int64_t T = x.dim(1), H = x.dim(2), half = x.dim(3) / 2;
  Device d = x.device();
  Tensor cs = Tensor::uninit({T * half}, DType::F32, d), sn = Tensor::uninit({T * half}, DType::F32, d);
  gpu::copy_to_device(d.index, cs.raw(), cos_table, cs.nbytes());
  gpu::copy_to_device(d.index, sn.raw(), sin_table, sn.nbytes());
  with_float(x.dtype(), [&](auto tag) {
    using E = typename decltype(tag)::type;
    launch_map(d, x.numel() / 2, Rotate<E>{ptr<E>(x), ptr<float>(cs), ptr<float>(sn), T, H, half}, "rope");
  });
}

}  // namespace dt::kernels::cuda
