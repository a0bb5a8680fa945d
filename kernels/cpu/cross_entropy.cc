// Cross-entropy over rows of logits on the CPU: one row per task, log-sum-exp taken
// max-subtracted so huge logits neither overflow nor lose the target's term.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_ops.h"

namespace dt::kernels::cpu {
namespace {

// Every target is in [0, v) or ignored; checked for all rows before any output is written,
// so a bad batch leaves the outputs untouched.
void check_targets(const char* op, const int32_t* t, int64_t rows, int64_t v, int32_t ignore_index) {
  for (int64_t r = 0; r < rows; ++r) {
    if (t[r] == ignore_index || (t[r] >= 0 && t[r] < v)) continue;
    invalid(std::string(op) + ": targets[" + std::to_string(r) + "] is " + std::to_string(t[r]) +
            "; accepted: [0, " + std::to_string(v) + ") or ignore_index " + std::to_string(ignore_index));
  }
}

// Row maximum and log(sum(exp(x - max))), in f32.
template <class T> void row_stats(const T* x, int64_t v, float* mx, float* log_sum) {
  float m = -INFINITY;
  for (int64_t j = 0; j < v; ++j) m = std::max(m, to_f32(x[j]));
  float s = 0.0f;
  for (int64_t j = 0; j < v; ++j) s += std::exp(to_f32(x[j]) - m);
  *mx = m;
  *log_sum = std::log(s);
}

int64_t grain_rows(int64_t v) { return std::max<int64_t>(1, 8192 / v); }

}  // namespace

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int32_t ignore_index, Tensor& losses) {
  int64_t rows = logits.dim(0), v = logits.dim(1);
  const int32_t* tg = targets.data<int32_t>();
  check_targets("cross_entropy_forward", tg, rows, v, ignore_index);
  float* loss = losses.data<float>();
  dispatch_float(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    parallel_for(rows, grain_rows(v), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        if (tg[r] == ignore_index) {
          loss[r] = 0.0f;
          continue;
        }
        float m, ls;
        row_stats(x + r * v, v, &m, &ls);
        // -log softmax[t] = log(sum exp(x - m)) - (x[t] - m)
        loss[r] = ls - (to_f32(x[r * v + tg[r]]) - m);
      }
    });
  });
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& dlosses,
                            int32_t ignore_index, Tensor& dlogits) {
  int64_t rows = logits.dim(0), v = logits.dim(1);
  const int32_t* tg = targets.data<int32_t>();
  check_targets("cross_entropy_backward", tg, rows, v, ignore_index);
  const float* dl = dlosses.data<float>();
  dispatch_float(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    T* dx = dlogits.data<T>();
    parallel_for(rows, grain_rows(v), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = x + r * v;
        T* dr = dx + r * v;
        if (tg[r] == ignore_index) {
          std::fill(dr, dr + v, from_f32<T>(0.0f));
          continue;
        }
        float m, ls;
        row_stats(xr, v, &m, &ls);
        float g = dl[r], shift = m + ls;  // softmax = exp(x - m - log_sum)
        for (int64_t j = 0; j < v; ++j) {
          float p = std::exp(to_f32(xr[j]) - shift);
          dr[j] = from_f32<T>((p - (j == tg[r] ? 1.0f : 0.0f)) * g);
        }
      }
    });
  });
}

}  // namespace dt::kernels::cpu
