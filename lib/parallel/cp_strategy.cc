#include "parallel/cp_strategy.h"

#include "core/error.h"
#include "nn/ring_attention.h"

namespace dt::parallel {

void CpStrategy::check_micro_batch(const std::string& what, int64_t, int64_t T) const {
  const int64_t chunks = 2 * static_cast<int64_t>(cp_.size());
  DT_CHECK(T % chunks == 0, what + ": sequence length T = " + std::to_string(T) + " does not split into 2 x cp = " +
                                std::to_string(chunks) + " equal chunks (context parallelism, cp = " +
                                std::to_string(cp_.size()) + "); accepted: T a multiple of " + std::to_string(chunks));
}

void CpStrategy::select_tokens(Tensor& inputs, Tensor& targets) const {
  const std::vector<int64_t> cols = nn::CpGroup{&cp_}.columns(inputs.dim(1));
  for (Tensor* t : {&inputs, &targets}) {
    const int64_t B = t->dim(0), T = t->dim(1), n = static_cast<int64_t>(cols.size());
    Tensor mine = Tensor::uninit({B, n}, t->dtype());
    const int32_t* src = t->data<int32_t>();
    int32_t* dst = mine.data<int32_t>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < n; ++i) dst[b * n + i] = src[b * T + cols[static_cast<size_t>(i)]];
    *t = mine;
  }
}

}  // namespace dt::parallel
