// bias_add and bias_backward on CUDA. dbias is a deterministic column sum.
#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda {
namespace {

template <class T> struct BiasAdd {
  T* y;
  const T* b;
  int64_t c;
  __device__ void operator()(int64_t i) const { y[i] = st<T>(ld(y[i]) + ld(b[i % c])); }
};
template <class T> struct Column {
  const T* dy;
  int64_t c;
  __device__ float operator()(int64_t r, int64_t j) const { return ld(dy[r * c + j]); }
};

}  // namespace

void bias_add(Tensor& y, const Tensor& bias) {
  with_float(y.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(y.device(), y.numel(), BiasAdd<T>{ptr<T>(y), ptr<T>(bias), y.cols()}, "bias_add");
  });
}

void bias_backward(const Tensor& dy, Tensor& dbias) {
  with_float(dy.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    colsum_accumulate(dy.device(), dy.rows(), dy.cols(), Column<T>{ptr<T>(dy), dy.cols()}, ptr<T>(dbias),
                      "bias_backward");
  });
}

}  // namespace dt::kernels::cuda
