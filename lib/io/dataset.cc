#include "io/dataset.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "core/error.h"
#include "core/rng.h"

namespace dt::io {
namespace {

void check_context(int64_t context, const char* who) {
  DT_CHECK(context >= 1, std::string(who) + ": context is " + std::to_string(context) + "; accepted: >= 1");
}

// A little-endian u16 or u32 token, whatever the host's byte order.
uint64_t decode(const unsigned char* b, int width) {
  if (width == 2) return b[0] | uint64_t(b[1]) << 8;
  return b[0] | uint64_t(b[1]) << 8 | uint64_t(b[2]) << 16 | uint64_t(b[3]) << 24;
}

}  // namespace

std::shared_ptr<TokenDataset> TokenDataset::from_tokens(std::vector<int32_t> tokens, int64_t context) {
  check_context(context, "TokenDataset");
  std::shared_ptr<TokenDataset> d(new TokenDataset());
  d->num_tokens_ = static_cast<int64_t>(tokens.size());
  d->owned_ = std::move(tokens);
  d->context_ = context;
  return d;
}

std::shared_ptr<TokenDataset> TokenDataset::from_text_file(const std::string& path, int64_t context) {
  check_context(context, "TokenDataset::from_text_file");
  std::vector<char> bytes = read_file(path);
  std::vector<int32_t> tokens(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) tokens[i] = static_cast<unsigned char>(bytes[i]);
  return from_tokens(std::move(tokens), context);
}

std::shared_ptr<TokenDataset> TokenDataset::from_token_file(const std::string& path, int width, int64_t context,
                                                            int64_t vocab_size) {
  check_context(context, "TokenDataset::from_token_file");
  DT_CHECK(width == 2 || width == 4, "TokenDataset::from_token_file: width is " + std::to_string(width) +
                                         "; accepted: 2 (u16) or 4 (u32)");
  std::shared_ptr<TokenDataset> d(new TokenDataset());
  d->file_ = std::make_shared<ReadOnlyFile>(path);
  const size_t bytes = d->file_->size();
  if (bytes % static_cast<size_t>(width) != 0)
    fail(DT_ERR_IO, path + ": size " + std::to_string(bytes) + " bytes is not a multiple of the " +
                        std::to_string(width) + "-byte token width");
  d->width_ = width;
  d->num_tokens_ = static_cast<int64_t>(bytes / static_cast<size_t>(width));
  d->context_ = context;
  // One pass now so that get() never meets a bad token in the middle of training; read in
  // chunks so that a file larger than RAM is never held whole.
  int64_t limit = vocab_size > 0 ? vocab_size : (int64_t(1) << 31);
  const size_t chunk = (size_t(1) << 20) * static_cast<size_t>(width);
  std::vector<unsigned char> buf;
  for (size_t at = 0; at < bytes; at += chunk) {
    const size_t n = std::min(chunk, bytes - at);
    buf.resize(n);
    d->file_->copy_to(at, buf.data(), n);
    for (size_t k = 0; k < n; k += static_cast<size_t>(width)) {
      uint64_t t = decode(buf.data() + k, width);
      if (static_cast<int64_t>(t) >= limit)
        fail(DT_ERR_IO, path + ": token " + std::to_string((at + k) / static_cast<size_t>(width)) + " is " +
                            std::to_string(t) + "; accepted: below " + std::to_string(limit));
    }
  }
  return d;
}

int64_t TokenDataset::size() const { return num_tokens_ > context_ ? (num_tokens_ - 1) / context_ : 0; }

int32_t TokenDataset::token(int64_t i) const {
  if (!file_) return owned_[static_cast<size_t>(i)];
  unsigned char b[4];
  file_->copy_to(static_cast<uint64_t>(i) * static_cast<uint64_t>(width_), b, static_cast<size_t>(width_));
  return static_cast<int32_t>(decode(b, width_));
}

void TokenDataset::get(int64_t i, int32_t* input, int32_t* target) const {
  DT_CHECK(i >= 0 && i < size(), "TokenDataset::get: index " + std::to_string(i) + "; accepted: [0, " +
                                     std::to_string(size()) + ")");
  const int64_t base = i * context_;
  if (!file_) {
    for (int64_t k = 0; k < context_; ++k) input[k] = owned_[size_t(base + k)], target[k] = owned_[size_t(base + k + 1)];
    return;
  }
  // One read of the context + 1 tokens the example spans.
  const size_t w = static_cast<size_t>(width_), n = static_cast<size_t>(context_ + 1);
  std::vector<unsigned char> buf(n * w);
  file_->copy_to(static_cast<uint64_t>(base) * w, buf.data(), buf.size());
  for (size_t k = 0; k + 1 < n; ++k) {
    input[k] = static_cast<int32_t>(decode(buf.data() + k * w, width_));
    target[k] = static_cast<int32_t>(decode(buf.data() + (k + 1) * w, width_));
  }
}

AdditionDataset::AdditionDataset(int digits, int64_t size, uint64_t seed, int32_t ignore_index, AdditionSplit split)
    : digits_(digits), split_(split), size_(size), seed_(seed), ignore_index_(ignore_index) {
  // 18 digits: a + b < 2e18 still fits in int64.
  DT_CHECK(digits >= 1 && digits <= 18, "AdditionDataset: digits is " + std::to_string(digits) + "; accepted: [1, 18]");
  DT_CHECK(size >= 1, "AdditionDataset: size is " + std::to_string(size) + "; accepted: >= 1");
  DT_CHECK(ignore_index < 0 || ignore_index >= 256,
           "AdditionDataset: ignore_index " + std::to_string(ignore_index) + " is a byte token; accepted: < 0 or >= 256");
}

std::string AdditionDataset::text(int64_t i) const {
  DT_CHECK(i >= 0 && i < size_, "AdditionDataset: index " + std::to_string(i) + "; accepted: [0, " +
                                    std::to_string(size_) + ")");
  uint64_t limit = 1;
  for (int d = 0; d < digits_; ++d) limit *= 10;
  int64_t a = 0, b = 0;
  // Attempt 0 is the All draw; a split redraws (new RNG key per attempt) until the problem
  // falls on its side: about 1.1 attempts for Train, 10 for HeldOut. With 1 digit there
  // are only 100 problems, so the loop is bounded and then takes what it has.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    CounterRng rng(seed_, attempt == 0 ? std::string("io.addition") : "io.addition.redraw." + std::to_string(attempt));
    auto draw = [&](uint64_t k) {  // 64 random bits per operand; the modulo bias is < 2^-4
      uint64_t u = uint64_t(rng.bits(4 * uint64_t(i) + 2 * k)) << 32 | rng.bits(4 * uint64_t(i) + 2 * k + 1);
      return static_cast<int64_t>(u % limit);
    };
    a = draw(0), b = draw(1);
    if (split_ == AdditionSplit::All || held_out(a, b) == (split_ == AdditionSplit::HeldOut)) break;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%0*" PRId64 "+%0*" PRId64 "=%0*" PRId64 "\n", digits_, a, digits_, b, digits_ + 1,
                a + b);
  return buf;
}

bool AdditionDataset::held_out(int64_t a, int64_t b) {
  // splitmix64's finalizer: every bit of (a, b) moves the result, so the held-out tenth is
  // spread over all carry patterns and magnitudes rather than one residue class.
  uint64_t z = static_cast<uint64_t>(a) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(b);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return z % 10 == 0;
}

void AdditionDataset::get(int64_t i, int32_t* input, int32_t* target) const {
  std::string s = text(i);
  int64_t t = context();
  for (int64_t k = 0; k < t; ++k) {
    input[k] = static_cast<unsigned char>(s[static_cast<size_t>(k)]);
    target[k] = k >= answer_begin() ? static_cast<unsigned char>(s[static_cast<size_t>(k + 1)]) : ignore_index_;
  }
}

int64_t exact_matches(const Tensor& target, const Tensor& predicted, int32_t ignore_index) {
  DT_CHECK(target.defined() && predicted.defined() && target.dtype() == DType::I32 &&
               predicted.dtype() == DType::I32 && target.shape() == predicted.shape() &&
               target.device().type == DeviceType::CPU && predicted.device().type == DeviceType::CPU,
           "exact_matches: target and predicted must be i32 CPU tensors of one shape");
  int64_t cols = target.cols(), hits = 0;
  const int32_t* t = target.data<int32_t>();
  const int32_t* p = predicted.data<int32_t>();
  for (int64_t r = 0; r < target.rows(); ++r) {
    bool any = false, all = true;
    for (int64_t c = r * cols; c < (r + 1) * cols; ++c)
      if (t[c] != ignore_index) any = true, all = all && t[c] == p[c];
    hits += any && all;
  }
  return hits;
}

}  // namespace dt::io
