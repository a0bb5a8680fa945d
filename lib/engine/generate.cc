#include "engine/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "core/device_scope.h"
#include "core/error.h"
#include "core/tensor_copy.h"
#include "core/rng.h"
#include "kernels/ops.h"
#include "nn/kv_cache.h"

namespace dt::engine {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

void check_generate(const nn::GPTConfig& c, const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& o) {
  DT_CHECK(!prompts.empty(), "prompts: empty; accepted: at least one prompt");
  DT_CHECK(o.max_new_tokens >= 0, "max_new_tokens = " + std::to_string(o.max_new_tokens) + "; accepted: >= 0");
  o.check(c.vocab_size);
  for (size_t b = 0; b < prompts.size(); ++b) {
    const std::string w = "prompts[" + std::to_string(b) + "]";
    const int64_t L = static_cast<int64_t>(prompts[b].size());
    DT_CHECK(L > 0, w + ": empty prompt; accepted: at least one token");
    DT_CHECK(L + o.max_new_tokens <= c.context, w + ": length " + std::to_string(L) + " + max_new_tokens " +
                                                    std::to_string(o.max_new_tokens) + " exceeds context = " +
                                                    std::to_string(c.context));
    for (int32_t t : prompts[b])
      DT_CHECK(t >= 0 && t < c.vocab_size, w + ": token id " + std::to_string(t) + " is outside [0, vocab_size = " +
                                               std::to_string(c.vocab_size) + ")");
  }
}

void SamplingOptions::check(int64_t vocab_size) const {
  DT_CHECK(std::isfinite(temperature) && temperature >= 0,
           "temperature = " + std::to_string(temperature) + "; accepted: >= 0 (0: greedy)");
  DT_CHECK(top_k >= 0, "top_k = " + std::to_string(top_k) + "; accepted: >= 0 (0: no cut)");
  DT_CHECK(top_p > 0 && top_p <= 1, "top_p = " + std::to_string(top_p) + "; accepted: (0, 1]");
  for (int32_t t : stop_tokens)
    DT_CHECK(t >= 0 && t < vocab_size, "stop_tokens: id " + std::to_string(t) + " is outside [0, vocab_size = " +
                                           std::to_string(vocab_size) + ")");
}

int64_t generate_cache_len(const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& o) {
  int64_t n = 0;
  for (const auto& p : prompts) n = std::max<int64_t>(n, static_cast<int64_t>(p.size()) + o.max_new_tokens);
  return n;
}

bool record_token(GenerateResult& res, int64_t b, int32_t t, const GenerateOptions& o) {
  std::vector<int32_t>& mine = res.tokens[static_cast<size_t>(b)];
  mine.push_back(t);
  if (o.on_token) o.on_token(b, t);
  return static_cast<int64_t>(mine.size()) >= o.max_new_tokens ||
         std::find(o.stop_tokens.begin(), o.stop_tokens.end(), t) != o.stop_tokens.end();
}

const float* host_f32_logits(const Tensor& logits, Tensor& f32, Tensor& host) {
  const Tensor* l = &logits;
  if (logits.dtype() != DType::F32) {
    kernels::cast(logits, nn::ensure(f32, logits.shape(), DType::F32));
    l = &f32;
  }
  if (l->device().type == DeviceType::CPU) return l->data<float>();
  if (!host.defined() || host.shape() != l->shape()) host = Tensor::uninit(l->shape(), DType::F32);
  copy_tensor(*l, host);
  return host.data<float>();
}

void finish_generate_stats(GenerateResult& res, int64_t decode_steps, double decode_s, double total_s) {
  for (const auto& t : res.tokens) res.stats.new_tokens += static_cast<int64_t>(t.size());
  res.stats.inter_token_latency_s = decode_steps > 0 ? decode_s / static_cast<double>(decode_steps) : 0.0;
  res.stats.tokens_per_s = total_s > 0 ? static_cast<double>(res.stats.new_tokens) / total_s : 0.0;
}

int32_t sample_token(const float* logits, int64_t V, const SamplingOptions& o, float u) {
  if (o.temperature <= 0) return static_cast<int32_t>(std::max_element(logits, logits + V) - logits);
  // Candidates by descending logit, lowest id first on ties (stable sort), so top_k = 1 is
  // exactly the greedy choice.
  std::vector<int32_t> idx(V);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  int64_t n = o.top_k > 0 ? std::min<int64_t>(o.top_k, V) : V;
  std::vector<double> p(n);
  const double mx = logits[idx[0]];
  double z = 0;
  for (int64_t i = 0; i < n; ++i) z += p[i] = std::exp((logits[idx[i]] - mx) / o.temperature);
  if (o.top_p < 1) {  // the smallest prefix (by probability) whose mass reaches top_p
    double c = 0;
    for (int64_t i = 0; i < n; ++i)
      if ((c += p[i] / z) >= o.top_p) {
        n = i + 1;
        break;
      }
    z = 0;
    for (int64_t i = 0; i < n; ++i) z += p[i];
  }
  const double target = static_cast<double>(u) * z;
  double c = 0;
  for (int64_t i = 0; i < n; ++i)
    if ((c += p[i]) > target) return idx[i];
  return idx[n - 1];  // u * z rounded up to the total
}

GenerateResult generate(nn::GPT& model, const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& o) {
  const nn::GPTConfig& c = model.config();
  check_generate(c, prompts, o);
  const int64_t B = static_cast<int64_t>(prompts.size());
  GenerateResult res;
  res.tokens.resize(B);
  if (o.max_new_tokens == 0) return res;
  ScopedDevice on(model.device());  // the cache and every buffer beside the model
  // tp: this rank's heads
  nn::KvCache cache = nn::KvCache::create(c, B, generate_cache_len(prompts, o), model.local_kv_heads());
  const CounterRng rng(o.seed, "sample");
  const int64_t V = c.vocab_size;
  std::vector<bool> done(B, false);
  auto emit = [&](int64_t b, const float* row, int64_t step) {
    const int32_t t = sample_token(row, V, o, rng.uniform(static_cast<uint64_t>(step * B + b)));
    done[b] = record_token(res, b, t, o);
  };
  const auto t0 = Clock::now();
  Tensor logits, logits32, host32;
  auto f32_logits = [&] { return host_f32_logits(logits, logits32, host32); };
  auto stop_here = [&] { return o.should_stop && (res.cancelled = o.should_stop()); };
  for (int64_t b = 0; b < B; ++b) {  // prefill, one prompt per cache row
    if (stop_here()) return res;
    const int64_t L = static_cast<int64_t>(prompts[b].size());
    Tensor ids = Tensor::zeros({1, L}, DType::I32);
    std::copy(prompts[b].begin(), prompts[b].end(), ids.data<int32_t>());
    model.forward_cached(ids, cache, {b}, logits, /*last_only=*/true);
    emit(b, f32_logits(), 0);
  }
  res.stats.time_to_first_token_s = since(t0);
  const auto t1 = Clock::now();
  int64_t decode_steps = 0;
  for (int64_t step = 1;; ++step) {  // decode the unfinished rows together
    std::vector<int64_t> rows;
    for (int64_t b = 0; b < B; ++b)
      if (!done[b]) rows.push_back(b);
    if (rows.empty() || stop_here()) break;
    const int64_t A = static_cast<int64_t>(rows.size());
    Tensor ids = Tensor::zeros({A, 1}, DType::I32);
    for (int64_t j = 0; j < A; ++j) ids.data<int32_t>()[j] = res.tokens[rows[j]].back();
    model.forward_cached(ids, cache, rows, logits);
    const float* l32 = f32_logits();
    for (int64_t j = 0; j < A; ++j) emit(rows[j], l32 + j * V, step);
    ++decode_steps;
  }
  finish_generate_stats(res, decode_steps, since(t1), since(t0));
  return res;
}

}  // namespace dt::engine
