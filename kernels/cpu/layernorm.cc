// layernorm on the CPU. y and dx: one row per task. dweight and dbias: split over columns
// (parallel_over_columns), so they are bitwise independent of the thread count.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/row_f32.h"

namespace dt::kernels::cpu {
namespace {

// Rows [r0, r1): two-pass mean and variance (no cancellation of E[x^2] - E[x]^2).
template <class T>
void layernorm_rows(const T* x, const T* w, const T* b, float eps, T* y, float* mean, float* rstd, int64_t c,
                    int64_t r0, int64_t r1) {
  std::vector<float> wbuf(c), bbuf(c), xbuf(c), ybuf(c);
  const float* wf = row_f32(w, c, wbuf.data());
  const float* bf = b ? row_f32(b, c, bbuf.data()) : nullptr;
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = row_f32(x + r * c, c, xbuf.data());
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < c; ++j) s += xr[j];
    float m = s / static_cast<float>(c);
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int64_t j = 0; j < c; ++j) v += (xr[j] - m) * (xr[j] - m);
    float rs = 1.0f / std::sqrt(v / static_cast<float>(c) + eps);
    float* yr = out_f32(y + r * c, ybuf.data());
    if (bf) {
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) yr[j] = (xr[j] - m) * rs * wf[j] + bf[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) yr[j] = (xr[j] - m) * rs * wf[j];
    }
    store_row(yr, c, y + r * c);
    mean[r] = m;
    rstd[r] = rs;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), with g = dy * w and xhat the normalized x.
template <class T>
void layernorm_dx_rows(const T* dy, const T* x, const T* w, const float* mean, const float* rstd, T* dx, int64_t c,
                       int64_t r0, int64_t r1) {
  std::vector<float> wbuf(c), dybuf(c), xbuf(c), dxbuf(c);
  const float* wf = row_f32(w, c, wbuf.data());
  for (int64_t r = r0; r < r1; ++r) {
    const float* dyr = row_f32(dy + r * c, c, dybuf.data());
    const float* xr = row_f32(x + r * c, c, xbuf.data());
    float m = mean[r], rs = rstd[r], sg = 0.0f, sgx = 0.0f;
#pragma omp simd reduction(+ : sg, sgx)
    for (int64_t j = 0; j < c; ++j) {
      float g = dyr[j] * wf[j];
      sg += g;
      sgx += g * (xr[j] - m) * rs;
    }
    sg /= static_cast<float>(c);
    sgx /= static_cast<float>(c);
    float* dxr = out_f32(dx + r * c, dxbuf.data());
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) dxr[j] = rs * (dyr[j] * wf[j] - sg - (xr[j] - m) * rs * sgx);
    store_row(dxr, c, dx + r * c);
  }
}

// Columns [c0, c1) of dweight += sum_r dy * xhat and dbias += sum_r dy (db may be null).
template <class T>
void layernorm_param_cols(const T* dy, const T* x, const float* mean, const float* rstd, T* dw, T* db, int64_t rows,
                          int64_t c, int64_t c0, int64_t c1) {
  int64_t n = c1 - c0;
  std::vector<float> aw(n, 0.0f), ab(n, 0.0f), dybuf(n), xbuf(n);
  for (int64_t r = 0; r < rows; ++r) {
    const float* dyr = row_f32(dy + r * c + c0, n, dybuf.data());
    const float* xr = row_f32(x + r * c + c0, n, xbuf.data());
    float m = mean[r], rs = rstd[r];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      aw[j] += dyr[j] * ((xr[j] - m) * rs);
      ab[j] += dyr[j];
    }
  }
  accumulate_row(aw.data(), n, dw + c0);
  if (db) accumulate_row(ab.data(), n, db + c0);
}

}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y,
                       Tensor& mean, Tensor& rstd) {
  int64_t c = x.cols();
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* b = bias.defined() ? bias.data<T>() : nullptr;
    parallel_for(x.rows(), grain_for(c), [&](int64_t r0, int64_t r1) {
      layernorm_rows(x.data<T>(), weight.data<T>(), b, eps, y.data<T>(), mean.data<float>(), rstd.data<float>(), c,
                     r0, r1);
    });
  });
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor& dx, Tensor& dweight, Tensor& dbias) {
  int64_t c = x.cols(), rows = x.rows();
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const float *m = mean.data<float>(), *rs = rstd.data<float>();
    // Parameter grads first: they read dy and x whole, so dx may then overwrite dy in place.
    T* db = dbias.defined() ? dbias.data<T>() : nullptr;
    parallel_over_columns(rows, c, [&](int64_t c0, int64_t c1) {
      layernorm_param_cols(dy.data<T>(), x.data<T>(), m, rs, dweight.data<T>(), db, rows, c, c0, c1);
    });
    parallel_for(rows, grain_for(c), [&](int64_t r0, int64_t r1) {
      layernorm_dx_rows(dy.data<T>(), x.data<T>(), weight.data<T>(), m, rs, dx.data<T>(), c, r0, r1);
    });
  });
}

}  // namespace dt::kernels::cpu
