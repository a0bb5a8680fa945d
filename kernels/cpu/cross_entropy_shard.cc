// Vocab-parallel cross-entropy on the CPU: this rank's columns of the logits, one row per
// task, math in f32. Only the first `valid` columns are read; padding never is, so the
// garbage a padded last shard holds there cannot leak into a max, a sum or a gradient.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_ops.h"

namespace dt::kernels::cpu {
namespace {

// Targets are global ids, so a shard can check only the lower bound (and that the id is
// below INT32_MAX, as every vocabulary id is, so that the CUDA check agrees); done for all
// rows before any output is written, as cross_entropy does.
void check_shard_target_ids(const char* op, const int32_t* t, int64_t rows, int32_t ignore_index) {
  for (int64_t r = 0; r < rows; ++r) {
    if (t[r] == ignore_index || (t[r] >= 0 && t[r] < std::numeric_limits<int32_t>::max())) continue;
    invalid(std::string(op) + ": targets[" + std::to_string(r) + "] is " + std::to_string(t[r]) +
            "; accepted: a vocabulary id >= 0 or ignore_index " + std::to_string(ignore_index));
  }
}

// The column of this shard that holds target t, or -1 when another shard holds it.
int64_t shard_column(int32_t t, int64_t vocab_begin, int64_t valid) {
  int64_t c = static_cast<int64_t>(t) - vocab_begin;
  return c >= 0 && c < valid ? c : -1;
}

int64_t shard_grain_rows(int64_t valid) { return std::max<int64_t>(1, 8192 / valid); }

}  // namespace

void cross_entropy_shard_max(const Tensor& logits, int64_t valid, Tensor& row_max) {
  int64_t rows = logits.dim(0), vs = logits.dim(1);
  float* mx = row_max.data<float>();
  dispatch_float(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    parallel_for(rows, shard_grain_rows(valid), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        float m = -INFINITY;
        for (int64_t j = 0; j < valid; ++j) m = std::max(m, to_f32(x[r * vs + j]));
        mx[r] = m;
      }
    });
  });
}

void cross_entropy_shard_forward(const Tensor& logits, const Tensor& targets, int64_t vocab_begin, int64_t valid,
                                 int32_t ignore_index, const Tensor& row_max, Tensor& partial) {
  int64_t rows = logits.dim(0), vs = logits.dim(1);
  const int32_t* tg = targets.data<int32_t>();
  check_shard_target_ids("cross_entropy_shard_forward", tg, rows, ignore_index);
  const float* mx = row_max.data<float>();
  float* out = partial.data<float>();
  dispatch_float(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    parallel_for(rows, shard_grain_rows(valid), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        out[2 * r] = out[2 * r + 1] = 0.0f;
        if (tg[r] == ignore_index) continue;
        const T* xr = x + r * vs;
        float m = mx[r], s = 0.0f;
        for (int64_t j = 0; j < valid; ++j) s += std::exp(to_f32(xr[j]) - m);
        out[2 * r] = s;
        int64_t c = shard_column(tg[r], vocab_begin, valid);
        if (c >= 0) out[2 * r + 1] = to_f32(xr[c]);
      }
    });
  });
}

void cross_entropy_shard_backward(const Tensor& logits, const Tensor& targets, int64_t vocab_begin, int64_t valid,
                                  int32_t ignore_index, const Tensor& lse, const Tensor& dlosses, Tensor& dlogits) {
  int64_t rows = logits.dim(0), vs = logits.dim(1);
  const int32_t* tg = targets.data<int32_t>();
  check_shard_target_ids("cross_entropy_shard_backward", tg, rows, ignore_index);
  const float* ls = lse.data<float>();
  const float* dl = dlosses.data<float>();
  dispatch_float(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    T* dx = dlogits.data<T>();
    parallel_for(rows, shard_grain_rows(vs), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = x + r * vs;
        T* dr = dx + r * vs;
        int64_t filled = 0;  // columns [filled, vs) are zeroed below: padding, or the whole ignored row
        if (tg[r] != ignore_index) {
          int64_t c = shard_column(tg[r], vocab_begin, valid);
          float g = dl[r], shift = ls[r];  // softmax = exp(z - lse), lse over the whole vocabulary
          for (int64_t j = 0; j < valid; ++j) {
            float p = std::exp(to_f32(xr[j]) - shift);
            dr[j] = from_f32<T>((p - (j == c ? 1.0f : 0.0f)) * g);
          }
          filled = valid;
        }
        std::fill(dr + filled, dr + vs, from_f32<T>(0.0f));
      }
    });
  });
}

}  // namespace dt::kernels::cpu
