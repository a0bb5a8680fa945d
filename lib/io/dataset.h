// Datasets of fixed-length examples: example i is `context` input tokens and the
// `context` targets the model should predict for them (the inputs shifted by one). Every
// example is a pure function of the dataset and i, so a sampler can reorder and split them
// across ranks, and a resumed run sees the same data.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/file_util.h"

namespace dt::io {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;     // number of examples
  virtual int64_t context() const = 0;  // tokens per example
  // Writes example i's inputs and targets (each `context` tokens).
  virtual void get(int64_t i, int32_t* input, int32_t* target) const = 0;
};

// A token stream cut into non-overlapping windows: example i reads tokens
// [i*T, i*T + T] (T + 1 tokens: input = the first T, target = the last T). A tail too short
// for a window is not used.
class TokenDataset final : public Dataset {
 public:
  // Bytes of any file, one token per byte (the ByteTokenizer's encoding).
  static std::shared_ptr<TokenDataset> from_text_file(const std::string& path, int64_t context);
  // Little-endian u16 or u32 tokens (width 2 or 4), read per example, not loaded: token
  // files may exceed RAM. Checked once at open: size a multiple of the width, every token
  // below vocab_size (when > 0) and within i32. A file truncated later makes get() fail
  // with DT_ERR_IO (ReadOnlyFile), never a crash.
  static std::shared_ptr<TokenDataset> from_token_file(const std::string& path, int width, int64_t context,
                                                       int64_t vocab_size = 0);
  static std::shared_ptr<TokenDataset> from_tokens(std::vector<int32_t> tokens, int64_t context);

  int64_t size() const override;
  int64_t context() const override { return context_; }
  void get(int64_t i, int32_t* input, int32_t* target) const override;
  int64_t num_tokens() const { return num_tokens_; }
  int32_t token(int64_t i) const;

 private:
  TokenDataset() = default;
  std::vector<int32_t> owned_;
  std::shared_ptr<ReadOnlyFile> file_;
  int width_ = 4;  // bytes per token in file_
  int64_t num_tokens_ = 0, context_ = 0;
};

// Synthetic multi-digit addition: example i is "a+b=c\n" with a, b uniform in
// [0, 10^digits) drawn from (seed, i), operands zero-padded to `digits` and the sum to
// digits + 1, so every example has the same length: context = 3 * digits + 3 (the string
// has 3 * digits + 4 bytes). Only the answer is learned: targets are ignore_index except
// for the sum's digits and the final newline, so a prediction is exactly right when every
// non-ignored target is.
//
// Held out: a problem (a, b) belongs to the held-out tenth when a hash of (a, b) says so,
// whatever the seed. A Train dataset draws only the other nine tenths and a HeldOut one only
// that tenth (by redrawing), so a test set of HeldOut problems is never seen in training.
enum class AdditionSplit { All, Train, HeldOut };

class AdditionDataset final : public Dataset {
 public:
  AdditionDataset(int digits, int64_t size, uint64_t seed, int32_t ignore_index = -100,
                  AdditionSplit split = AdditionSplit::All);
  int64_t size() const override { return size_; }
  int64_t context() const override { return 3 * digits_ + 3; }
  void get(int64_t i, int32_t* input, int32_t* target) const override;
  std::string text(int64_t i) const;  // "0123+0456=00579\n" style
  // Position in the target row of the first answer token (the rest follow to the end).
  int64_t answer_begin() const { return 2 * digits_ + 1; }
  int32_t ignore_index() const { return ignore_index_; }
  static bool held_out(int64_t a, int64_t b);

 private:
  int digits_;
  AdditionSplit split_;
  int64_t size_;
  uint64_t seed_;
  int32_t ignore_index_;
};

// Exact-match accuracy for tasks such as addition: the number of rows of `target`
// ([rows, context] i32) whose every non-ignored position equals `predicted` (same shape:
// e.g. the argmax of the logits). A row with no targeted position does not count.
int64_t exact_matches(const Tensor& target, const Tensor& predicted, int32_t ignore_index);

}  // namespace dt::io
