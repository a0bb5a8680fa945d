// rmsnorm on the CPU. y and dx: one row per task. dweight: split over columns
// (parallel_over_columns), so it is bitwise independent of the thread count.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/row_f32.h"

namespace dt::kernels::cpu {
namespace {

template <class T>
void rmsnorm_rows(const T* x, const T* w, float eps, T* y, float* rstd, int64_t c, int64_t r0, int64_t r1) {
  std::vector<float> wbuf(c), xbuf(c), ybuf(c);
  const float* wf = row_f32(w, c, wbuf.data());
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = row_f32(x + r * c, c, xbuf.data());
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t j = 0; j < c; ++j) ss += xr[j] * xr[j];
    float rs = 1.0f / std::sqrt(ss / static_cast<float>(c) + eps);
    float* yr = out_f32(y + r * c, ybuf.data());
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) yr[j] = xr[j] * rs * wf[j];
    store_row(yr, c, y + r * c);
    rstd[r] = rs;
  }
}

// dx = rstd * (g - xhat * mean(g * xhat)), with g = dy * w and xhat = x * rstd.
template <class T>
void rmsnorm_dx_rows(const T* dy, const T* x, const T* w, const float* rstd, T* dx, int64_t c, int64_t r0,
                     int64_t r1) {
  std::vector<float> wbuf(c), dybuf(c), xbuf(c), dxbuf(c);
  const float* wf = row_f32(w, c, wbuf.data());
  for (int64_t r = r0; r < r1; ++r) {
    const float* dyr = row_f32(dy + r * c, c, dybuf.data());
    const float* xr = row_f32(x + r * c, c, xbuf.data());
    float rs = rstd[r], sgx = 0.0f;
#pragma omp simd reduction(+ : sgx)
    for (int64_t j = 0; j < c; ++j) sgx += dyr[j] * wf[j] * (xr[j] * rs);
    sgx /= static_cast<float>(c);
    float* dxr = out_f32(dx + r * c, dxbuf.data());
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) dxr[j] = rs * (dyr[j] * wf[j] - (xr[j] * rs) * sgx);
    store_row(dxr, c, dx + r * c);
  }
}

// Columns [c0, c1) of dweight += sum_r dy * xhat.
template <class T>
void rmsnorm_dweight_cols(const T* dy, const T* x, const float* rstd, T* dw, int64_t rows, int64_t c, int64_t c0,
                          int64_t c1) {
  int64_t n = c1 - c0;
  std::vector<float> acc(n, 0.0f), dybuf(n), xbuf(n);
  for (int64_t r = 0; r < rows; ++r) {
    const float* dyr = row_f32(dy + r * c + c0, n, dybuf.data());
    const float* xr = row_f32(x + r * c + c0, n, xbuf.data());
    float rs = rstd[r];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) acc[j] += dyr[j] * (xr[j] * rs);
  }
  accumulate_row(acc.data(), n, dw + c0);
}

}  // namespace

void rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor& rstd) {
  int64_t c = x.cols();
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_for(x.rows(), grain_for(c), [&](int64_t r0, int64_t r1) {
      rmsnorm_rows(x.data<T>(), weight.data<T>(), eps, y.data<T>(), rstd.data<float>(), c, r0, r1);
    });
  });
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                      Tensor& dweight) {
  int64_t c = x.cols(), rows = x.rows();
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const float* rs = rstd.data<float>();
    // dweight first: it reads dy and x whole, so dx may then overwrite dy in place.
    parallel_over_columns(rows, c, [&](int64_t c0, int64_t c1) {
      rmsnorm_dweight_cols(dy.data<T>(), x.data<T>(), rs, dweight.data<T>(), rows, c, c0, c1);
    });
    parallel_for(rows, grain_for(c), [&](int64_t r0, int64_t r1) {
      rmsnorm_dx_rows(dy.data<T>(), x.data<T>(), weight.data<T>(), rs, dx.data<T>(), c, r0, r1);
    });
  });
}

}  // namespace dt::kernels::cpu
