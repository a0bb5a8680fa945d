// Byte-level tokenizer: token i < 256 is byte i, so any text (any encoding) round-trips
// exactly and there is nothing to train or ship. Optional special tokens (BOS, EOS, PAD,
// ...) take ids 256, 257, ... in the order given.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dt::io {

class ByteTokenizer {
 public:
  explicit ByteTokenizer(std::vector<std::string> specials = {});
  int32_t vocab_size() const { return 256 + static_cast<int32_t>(specials_.size()); }
  // The id of a special token; NOT_FOUND listing the known ones otherwise.
  int32_t special(const std::string& name) const;
  bool has_special(const std::string& name) const;

  std::vector<int32_t> encode(const std::string& text) const;
  // Bytes back; a special token is written as "<|name|>" unless skip_specials. An id
  // outside [0, vocab_size) is INVALID_ARGUMENT.
  std::string decode(const std::vector<int32_t>& ids, bool skip_specials = false) const;

 private:
  std::vector<std::string> specials_;
};

}  // namespace dt::io
