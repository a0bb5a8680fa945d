// Inside io/hf_tokenizer.h: the pieces the tokenizer's source files share. Not for other code.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dt::io::hft {

// ---- text (hf_text.cc) -----------------------------------------------------------------------
inline size_t u8len(unsigned char lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }
uint32_t u8decode(const char* p);  // one character of valid UTF-8
void u8append(std::string& out, uint32_t cp);
bool utf8_valid(std::string_view s);
// Python's bytes.decode("utf-8", errors="replace") (the same as Rust's from_utf8_lossy).
std::string utf8_replace_invalid(std::string_view s);
// The same as a stream: push() returns what is decided, keeping an unfinished character.
class Utf8Lossy {
 public:
  std::string push(std::string_view bytes);
  std::string finish();

 private:
  std::string pending_;
};
bool is_white_space(uint32_t cp);  // Unicode White_Space (Rust's char::is_whitespace, regex \s)
bool is_word_char(uint32_t cp);    // Rust regex \w
bool is_numeric(uint32_t cp);      // Rust's char::is_numeric: Nd, Nl or No
std::string nfc(std::string_view s);  // ICU
// GPT-2's byte <-> printable character table.
const std::string& byte_char(uint8_t b);  // UTF-8 of the character standing for byte b
int char_byte(uint32_t cp);               // the byte, or -1 for a character outside the table
uint64_t hash_bytes(std::string_view s);

// ---- regular expressions (hf_regex.cc) -------------------------------------------------------
struct Span {
  size_t start, end;
  bool match;
};
class Regex {
 public:
  // A pattern from a tokenizer.json (Oniguruma syntax), or a literal string. Errors name `where`.
  Regex(const std::string& pattern, bool literal, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // The (start, end) of every match, as the package's onig find_iter yields them.
  void find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const;
  // find_matches: the whole of `s` as matches and the gaps between them (none empty but a
  // lone (0, 0) for an empty `s`).
  void spans(std::string_view s, std::vector<Span>& out) const;

 private:
  std::string literal_;
  void* code_ = nullptr;  // pcre2_code_8
};
// Oniguruma (Ruby syntax) to PCRE2; throws for what it cannot carry over exactly.
std::string onig_to_pcre2(const std::string& pattern, const std::string& where);

// ---- hashing containers (hf_bpe.cc) ----------------------------------------------------------
// string -> int32, open addressing; keys live in one arena.
class StrMap {
 public:
  int32_t find(std::string_view key) const;  // -1 when absent
  bool insert(std::string_view key, int32_t value);  // false when present (value kept)
  size_t size() const { return count_; }
  void clear();
  void reserve(size_t n);

 private:
  struct Slot {
    uint64_t hash;
    uint32_t off, len;
    int32_t value;  // -1: empty
  };
  std::vector<Slot> slots_;
  std::string arena_;
  size_t count_ = 0;
  void grow();
};

// The BPE's cache of pre-token -> ids, bounded.
class BpeCache {
 public:
  static constexpr size_t kMaxEntries = 1 << 16;
  static constexpr size_t kMaxWordBytes = 256;
  bool get(std::string_view word, std::vector<int32_t>& out) const;  // appends on a hit
  void put(std::string_view word, const int32_t* ids, size_t n);

 private:
  StrMap index_;  // word -> entry
  std::vector<std::pair<uint32_t, uint32_t>> entries_;  // (offset, count) in ids_
  std::vector<int32_t> ids_;
};

// ---- the BPE model (hf_bpe.cc) ---------------------------------------------------------------
class BpeModel {
 public:
  struct Options {
    bool byte_fallback = false, fuse_unk = false, ignore_merges = false;
    std::string unk_token;  // "" = none
    bool has_unk = false;
  };
  // `where` names the file; `vocab`: (token, id); `merges`: (left, right) in rank order.
  void build(const std::string& where, std::vector<std::pair<std::string, int64_t>> vocab,
             const std::vector<std::pair<std::string, std::string>>& merges, const Options& opt);
  // Appends the ids of one pre-token (`cache` may be null).
  void tokenize(std::string_view word, std::vector<int32_t>& out, BpeCache* cache) const;
  int32_t token_to_id(std::string_view token) const { return vocab_.find(token); }
  const std::string* id_to_token(int32_t id) const;
  size_t size() const { return vocab_.size(); }
  int32_t id_end() const { return static_cast<int32_t>(by_id_.size()); }  // max id + 1

 private:
  struct MergeSlot {
    uint64_t key;  // (left << 32) | right; ~0 = empty
    int32_t rank, new_id;
  };
  StrMap vocab_;
  std::vector<std::string> by_id_;
  std::vector<uint8_t> has_id_;
  std::vector<MergeSlot> merges_;
  Options opt_;
  int32_t unk_id_ = -1;
  int32_t byte_ids_[256];
  bool all_bytes_ = false;
  const MergeSlot* find_merge(int32_t a, int32_t b) const;
  void merge_word(std::string_view w, std::vector<int32_t>& out) const;
};

// ---- normalizers and pre-tokenizers (hf_pretokenize.cc) --------------------------------------
class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& s) const = 0;
};
std::unique_ptr<Normalizer> make_nfc();
std::unique_ptr<Normalizer> make_prepend(std::string prepend);
std::unique_ptr<Normalizer> make_replace(std::unique_ptr<Regex> pattern, std::string content);
std::unique_ptr<Normalizer> make_normalizer_sequence(std::vector<std::unique_ptr<Normalizer>> items);

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
// Scratch of one encode call: a string and a span list per pre-tokenizer node.
struct PreCtx {
  std::vector<std::string> str;
  std::vector<std::vector<Span>> spans;
  std::vector<std::pair<size_t, size_t>> found;
};
class PieceSink {
 public:
  virtual void piece(std::string_view p, bool at_origin) = 0;

 protected:
  ~PieceSink() = default;
};
class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Hands each non-empty piece of `in` to `next`. `at_origin`: `in` starts at offset 0 of the
  // original text (Metaspace's prepend_scheme "first").
  virtual void run(std::string_view in, bool at_origin, PieceSink& next, PreCtx& ctx) const = 0;
  int slot = 0;  // its scratch in PreCtx
};
std::unique_ptr<PreTokenizer> make_byte_level_pre(bool add_prefix_space, bool use_regex);
std::unique_ptr<PreTokenizer> make_split(std::unique_ptr<Regex> pattern, Behavior behavior, bool invert);
std::unique_ptr<PreTokenizer> make_metaspace_pre(std::string replacement, int prepend_scheme, bool split);
std::unique_ptr<PreTokenizer> make_digits(bool individual);
std::unique_ptr<PreTokenizer> make_pre_sequence(std::vector<std::unique_ptr<PreTokenizer>> items);
enum PrependScheme { kAlways = 0, kFirst = 1, kNever = 2 };

// ---- decoders (hf_decode.cc) -----------------------------------------------------------------
struct Decoder {
  enum Kind { ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence } kind;
  std::string a, b;  // Metaspace: replacement; Replace: pattern, content; Strip: content char
  int prepend_scheme = kAlways;
  size_t start = 0, stop = 0;
  std::vector<Decoder> items;  // Sequence
};
// A stretch of a decoded token on its way through the streaming stages: `begin` on the first
// stretch of a token, `end` on its last.
struct Piece {
  std::string text;
  bool begin, end;
};
// `decoder` null: the tokens joined by " ".
std::string decode_tokens(const Decoder* decoder, std::vector<std::string> tokens);
class StreamPipeline {
 public:
  explicit StreamPipeline(const Decoder* decoder);
  ~StreamPipeline();
  std::string push(const std::string& token);
  std::string finish();

  struct Stage;  // one decoder step (hf_decode.cc)

 private:
  std::vector<std::unique_ptr<Stage>> stages_;
  bool join_with_space_;
  bool first_token_ = true;
  std::string run(size_t from, std::vector<Piece> pieces);
};

// ---- the tokenizer ---------------------------------------------------------------------------
struct AddedToken {
  std::string content;  // as written
  std::string match;    // what is matched: content, or its normalized form (normalized: true)
  int32_t id = -1;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};
// Leftmost-longest matching of the added tokens of one kind.
class TokenTrie {
 public:
  void add(const std::string& pattern, int32_t index);
  bool empty() const { return nodes_.size() <= 1; }
  // The leftmost match at or after `pos`, longest there: (start, end, index), or false.
  bool find(std::string_view s, size_t pos, size_t& start, size_t& end, int32_t& index) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, uint32_t>> next;  // sorted by byte
    int32_t index = -1;
  };
  std::vector<Node> nodes_{Node{}};
  bool first_[256] = {};
};

struct TemplateItem {
  bool sequence_a = false;
  std::vector<int32_t> ids;  // a special token's ids
};
struct PostProcessor {
  enum Kind { ByteLevel, Template, Sequence } kind = ByteLevel;
  std::vector<TemplateItem> single;
  std::vector<PostProcessor> items;
};

struct Impl {
  std::string where;
  BpeModel model;
  std::vector<AddedToken> added;
  StrMap added_by_content;  // content -> index in added
  TokenTrie raw_trie, norm_trie;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  int pre_slots = 0;
  bool has_post = false;
  PostProcessor post;
  bool has_decoder = false;
  Decoder decoder;
  int32_t vocab_size = 0;
  std::vector<std::string> token_of;  // what decode sees for each id ("" and !known: none)
  std::vector<uint8_t> known, special_skip, special;
  mutable std::mutex cache_mu;
  mutable BpeCache cache;

  void finish_build();  // the id tables, once model and added tokens are in
  void encode(std::string_view text, bool add_special, std::vector<int32_t>& out) const;
};

// Reads the JSON into `impl` (hf_tokenizer_load.cc).
void load_json(const std::string& where, const char* text, size_t n, Impl& impl);

}  // namespace dt::io::hft
