#include "core/random_fill.h"

#include <cstdint>
#include <cstring>

#include "core/error.h"
#include "core/gpu_runtime.h"
#include "core/rng.h"
#include "core/thread_pool.h"

namespace dt {

void fill_random(Tensor& t, Distribution dist, uint64_t seed, const std::string& name, int64_t offset, float a,
                 float b) {
  DT_CHECK(is_floating(t.dtype()),
           std::string("tensor has dtype ") + dtype_name(t.dtype()) + "; random fill accepts f32, bf16, f16");
  DT_CHECK(offset >= 0, "offset = " + std::to_string(offset) + "; accepted: >= 0");
  // offset + i is each element's global index: it must not wrap past INT64_MAX.
  DT_CHECK(offset <= INT64_MAX - t.numel(),
           "offset = " + std::to_string(offset) + " with " + std::to_string(t.numel()) +
               " elements runs past the largest element index (2^63 - 1); accepted: 0 to " +
               std::to_string(INT64_MAX - t.numel()));
  if (dist == Distribution::Normal) DT_CHECK(b >= 0.0f, "b (standard deviation) = " + std::to_string(b) + "; accepted: >= 0");
  else DT_CHECK(a <= b, "uniform range [" + std::to_string(a) + ", " + std::to_string(b) + "): a must be <= b");
  // Fill on the host (staging for device tensors), then copy.
  Tensor host = t.device().type == DeviceType::CPU ? t : Tensor::uninit(t.shape(), t.dtype());
  CounterRng rng(seed, name);
  dispatch_float(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = host.data<T>();
    parallel_for(t.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        uint64_t g = static_cast<uint64_t>(offset + i);
        float v = dist == Distribution::Normal ? a + b * rng.normal(g) : a + (b - a) * rng.uniform(g);
        p[i] = from_f32<T>(v);
      }
    });
  });
  if (t.device().type != DeviceType::CPU) gpu::copy_to_device(t.device().index, t.raw(), host.raw(), t.nbytes());
}

}  // namespace dt
