#include "common/model_inputs.h"

#include "core/rng.h"

namespace dt::bench {

Batch random_batch(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  Batch b{Tensor::zeros({B, T}, DType::I32), Tensor::zeros({B, T}, DType::I32)};
  CounterRng rng(seed, "bench_model");
  for (int64_t r = 0; r < B; ++r)
    for (int64_t t = 0; t < T; ++t) {
      b.in.data<int32_t>()[r * T + t] = static_cast<int32_t>(rng.bits(r * (T + 1) + t) % V);
      b.tg.data<int32_t>()[r * T + t] = static_cast<int32_t>(rng.bits(r * (T + 1) + t + 1) % V);
    }
  return b;
}

}  // namespace dt::bench
