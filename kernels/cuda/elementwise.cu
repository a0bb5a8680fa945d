// fill, scale and add on CUDA: elementwise grid-stride loops.
#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda {
namespace {

template <class T> struct Fill {
  T* x;
  float v;
  __device__ void operator()(int64_t i) const { x[i] = st<T>(v); }
};
template <class T> struct Scale {
  T* x;
  float a;
  __device__ void operator()(int64_t i) const { x[i] = st<T>(ld(x[i]) * a); }
};
template <class T> struct Add {  // out may alias a or b: each element reads both, then writes
  const T *a, *b;
  T* out;
  __device__ void operator()(int64_t i) const { out[i] = st<T>(ld(a[i]) + ld(b[i])); }
};

}  // namespace

void fill(Tensor& x, float value) {
  with_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(x.device(), x.numel(), Fill<T>{ptr<T>(x), value}, "fill");
  });
}

void scale(Tensor& x, float alpha) {
  with_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(x.device(), x.numel(), Scale<T>{ptr<T>(x), alpha}, "scale");
  });
}

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  with_float(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(a.device(), a.numel(), Add<T>{ptr<T>(a), ptr<T>(b), ptr<T>(out)}, "add");
  });
}

}  // namespace dt::kernels::cuda
