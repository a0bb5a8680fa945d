// Hugging Face `tokenizer.json` tokenizers (BPE: GPT-2, Llama 2 and 3, Qwen2, Mistral and the
// like), natively, giving the ids the `tokenizers` package gives. The pipeline is the
// package's: added tokens are split out of the raw text, each remaining piece is normalized,
// pre-tokenized and BPE-encoded (with a cache of pre-token -> ids), then the post-processor
// adds the template's special tokens.
//
// Accepted (anything else is refused by name, the JSON key and the value, never approximated):
//   model           BPE: vocab, merges as "a b" strings or ["a", "b"] pairs, unk_token, fuse_unk,
//                   byte_fallback (<0xNN> tokens), ignore_merges; dropout null or 0;
//                   continuing_subword_prefix / end_of_word_suffix null or "".
//   normalizer      null, NFC (ICU), Prepend, Replace (String or Regex pattern), Sequence.
//   pre_tokenizer   null, ByteLevel, Split (String or Regex; every behavior; invert),
//                   Metaspace, Digits, Sequence.
//   post_processor  null, ByteLevel (ids unchanged), TemplateProcessing (its `single` template;
//                   `pair` is read and checked but unused), Sequence.
//   decoder         null (tokens joined by " "), ByteLevel, Metaspace, Replace, ByteFallback,
//                   Fuse, Strip, Sequence.
//   added_tokens    matched in the raw text (normalized: false) or in each normalized piece
//                   (normalized: true), leftmost-longest, with single_word, lstrip, rstrip.
//   truncation and padding must be null; version "1.0".
// Regular expressions are the package's (Oniguruma, Ruby syntax) run on PCRE2 with UTF, UCP
// and JIT: \s \w \h and the like are rewritten to Oniguruma's meaning, and the constructs whose
// meaning differs and are not rewritten (\b, POSIX brackets, && in classes, ...) are refused.
//
// Text: invalid UTF-8 is first replaced as Python's bytes.decode("utf-8", errors="replace")
// does (one U+FFFD per maximal invalid subsequence), as a Python caller would hand it over.
//
// Hostile files: every failure is a dt::Error, DT_ERR_IO naming the file, the key and what is
// accepted. Memory is bounded: the file at most 256 MiB, at most 16 Mi JSON values nested at
// most 24 deep, at most 4 Mi vocab entries with ids below 4 Mi, at most 4 Mi merges, 64 Ki
// added tokens, Sequence nesting at most 8 deep; vocab ids must be unique, merges must name
// vocab tokens whose concatenation is in the vocab, and each added token's id must be the one
// `tokenizers` itself would assign it (its vocab id, or the next free one).
//
// Thread safety: a loaded HfTokenizer is immutable and may be used from any number of threads
// at once (copies share it). An HfStreamDecoder is used by one thread at a time.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dt::io {

namespace hft {
struct Impl;
class StreamPipeline;
}  // namespace hft

class HfTokenizer {
 public:
  static constexpr uint64_t kMaxFileBytes = uint64_t(256) << 20;
  static constexpr size_t kMaxJsonValues = size_t(16) << 20;
  static constexpr int kMaxJsonDepth = 24;
  static constexpr size_t kMaxVocab = size_t(4) << 20;  // entries, and the bound on ids
  static constexpr size_t kMaxMerges = size_t(4) << 20;
  static constexpr size_t kMaxAddedTokens = size_t(64) << 10;
  static constexpr int kMaxNesting = 8;  // Sequence inside Sequence ...

  // Reads and validates `tokenizer_json_path` (a regular file).
  static HfTokenizer load(const std::string& tokenizer_json_path);
  // The same from text; `where` names it in errors.
  static HfTokenizer parse(const std::string& json_text, const std::string& where);

  // add_special_tokens: apply the post_processor (TemplateProcessing adds BOS for Llama).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // Ids outside [0, vocab_size) are INVALID_ARGUMENT; an id in range that names no token is
  // skipped, as `tokenizers` skips it.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  int32_t vocab_size() const;  // max id + 1 over the model vocab and the added tokens
  int32_t token_to_id(const std::string& token) const;  // added tokens first; -1 when absent
  // INVALID_ARGUMENT outside [0, vocab_size) and for an id that names no token.
  std::string id_to_token(int32_t id) const;
  bool is_special(int32_t id) const;  // an added token with "special": true
  const std::string& source() const;  // the path or `where` it was read from

 private:
  explicit HfTokenizer(std::shared_ptr<const hft::Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const hft::Impl> impl_;
  friend class HfStreamDecoder;
};

// Streaming decode: push ids one at a time and get back only text that is final: never half a
// UTF-8 character, never a byte-fallback run that a later byte could still turn into U+FFFD,
// never a space that a Strip decoder may yet remove; the first token's leading-space strip of
// SentencePiece-style decoders is applied as a full decode applies it. Concatenating every
// push() result and finish() gives exactly decode(all ids, skip_special_tokens).
class HfStreamDecoder {
 public:
  explicit HfStreamDecoder(const HfTokenizer& tok, bool skip_special_tokens = true);
  ~HfStreamDecoder();
  HfStreamDecoder(HfStreamDecoder&&) noexcept;
  HfStreamDecoder& operator=(HfStreamDecoder&&) noexcept;
  std::string push(int32_t id);  // INVALID_ARGUMENT for an id outside [0, vocab_size)
  std::string finish();          // the rest; the decoder then starts a new text

 private:
  std::shared_ptr<const hft::Impl> impl_;
  bool skip_special_;
  std::unique_ptr<hft::StreamPipeline> pipe_;
};

}  // namespace dt::io
