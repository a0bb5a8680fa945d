#include "common/model_inputs.h"

#include <cstdio>
#include <cstdlib>

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

int64_t positive_flag(const Options& opt, const char* key, int64_t fallback, const std::string& usage,
                      const char* bench) {
  const std::string v = option_value(opt, key, std::to_string(fallback));
  size_t used = 0;
  long long x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
  }
  if (used != v.size() || x < 1) {
    std::fprintf(stderr, "%s: --%s %s: a positive integer is required\n%s", bench, key, v.c_str(), usage.c_str());
    std::exit(2);
  }
  return static_cast<int64_t>(x);
}

nn::GPTConfig gpt_from_flags(const Options& opt, const GptShape& fallback, const std::string& usage, const char* bench) {
  nn::GPTConfig cfg;
  cfg.n_layer = positive_flag(opt, "layers", fallback.layers, usage, bench);
  cfg.d_model = positive_flag(opt, "d-model", fallback.d_model, usage, bench);
  cfg.n_head = positive_flag(opt, "heads", fallback.heads, usage, bench);
  cfg.context = positive_flag(opt, "context", fallback.context, usage, bench);
  return cfg;
}

}  // namespace dt::bench
