// io/hf_tokenizer.h: loading, the encode pipeline (added tokens, normalizer, pre-tokenizer,
// BPE, post-processor), the id tables and the streaming decoder.
#include "io/hf_tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "io/file_util.h"
#include "io/hf_tok_internal.h"

namespace dt::io {
namespace hft {

// ---- TokenTrie
void TokenTrie::add(const std::string& pattern, int32_t index) {
  uint32_t node = 0;
  for (char ch : pattern) {
    const auto b = static_cast<uint8_t>(ch);
    auto& next = nodes_[node].next;
    auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(b, uint32_t(0)),
                               [](const auto& x, const auto& y) { return x.first < y.first; });
    if (it == next.end() || it->first != b) {
      const auto child = static_cast<uint32_t>(nodes_.size());
      it = next.insert(it, {b, child});
      nodes_.emplace_back();  // (invalidates `next`; `child` is kept by value)
      node = child;
    } else {
      node = it->second;
    }
  }
  nodes_[node].index = index;
  if (!pattern.empty()) first_[static_cast<uint8_t>(pattern[0])] = true;
}

bool TokenTrie::find(std::string_view s, size_t pos, size_t& start, size_t& end, int32_t& index) const {
  for (size_t i = pos; i < s.size(); ++i) {
    if (!first_[static_cast<uint8_t>(s[i])]) continue;
    uint32_t node = 0;
    int32_t best = -1;
    size_t best_end = 0;
    for (size_t j = i; j < s.size(); ++j) {
      const auto& next = nodes_[node].next;
      const auto b = static_cast<uint8_t>(s[j]);
      auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(b, uint32_t(0)),
                                 [](const auto& x, const auto& y) { return x.first < y.first; });
      if (it == next.end() || it->first != b) break;
      node = it->second;
      if (nodes_[node].index >= 0) {
        best = nodes_[node].index;
        best_end = j + 1;
      }
    }
    if (best >= 0) {
      start = i;
      end = best_end;
      index = best;
      return true;
    }
  }
  return false;
}

namespace {

uint32_t last_char(std::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return u8decode(s.data() + i);
}

// The start of the run of white space that ends `s` (regex \s*$).
size_t trailing_space_start(std::string_view s) {
  size_t i = s.size();
  while (i > 0) {
    size_t j = i - 1;
    while (j > 0 && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) --j;
    if (!is_white_space(u8decode(s.data() + j))) break;
    i = j;
  }
  return i;
}

// The length of the run of white space that starts `s` (regex ^\s*).
size_t leading_space_len(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_white_space(u8decode(s.data() + i))) i += u8len(static_cast<unsigned char>(s[i]));
  return i;
}

// Splits `s` around the added tokens of `trie` as the package's AddedVocabulary::find_matches
// does: on_text(piece, at_origin) for the text between, on_token(id) for each token.
template <class OnText, class OnToken>
void split_added(const Impl& impl, std::string_view s, const TokenTrie& trie, bool at_origin, OnText&& on_text,
                 OnToken&& on_token) {
  size_t start_offset = 0, pos = 0, st = 0, en = 0;
  int32_t index = -1;
  while (!trie.empty() && pos < s.size() && trie.find(s, pos, st, en, index)) {
    pos = en;  // the search goes on after this match, whatever becomes of it
    const AddedToken& tok = impl.added[static_cast<size_t>(index)];
    if (tok.single_word) {
      const bool space_before = st == 0 || !is_word_char(last_char(s.substr(0, st)));
      const bool space_after = en == s.size() || !is_word_char(u8decode(s.data() + en));
      if (!space_before || !space_after) continue;
    }
    size_t start = st, stop = en;
    if (tok.lstrip) start = std::max(trailing_space_start(s.substr(0, start)), start_offset);
    if (tok.rstrip) stop += leading_space_len(s.substr(stop));
    if (start_offset < start) on_text(s.substr(start_offset, start - start_offset), at_origin && start_offset == 0);
    on_token(tok.id);
    start_offset = stop;
  }
  if (start_offset < s.size()) on_text(s.substr(start_offset), at_origin && start_offset == 0);
}

class ModelSink final : public PieceSink {
 public:
  ModelSink(const BpeModel& m, std::vector<int32_t>& out, BpeCache* cache) : m_(m), out_(out), cache_(cache) {}
  void piece(std::string_view p, bool) override { m_.tokenize(p, out_, cache_); }

 private:
  const BpeModel& m_;
  std::vector<int32_t>& out_;
  BpeCache* cache_;
};

void post_process(const PostProcessor& p, std::vector<int32_t>& ids) {
  switch (p.kind) {
    case PostProcessor::ByteLevel: return;
    case PostProcessor::Template: {
      std::vector<int32_t> out;
      out.reserve(ids.size() + 4);
      for (const TemplateItem& item : p.single) {
        if (item.sequence_a)
          out.insert(out.end(), ids.begin(), ids.end());
        else
          out.insert(out.end(), item.ids.begin(), item.ids.end());
      }
      ids.swap(out);
      return;
    }
    case PostProcessor::Sequence:
      for (const PostProcessor& item : p.items) post_process(item, ids);
      return;
  }
}

void check_template_ids(const PostProcessor& p, int32_t vocab_size, const std::string& where) {
  for (const TemplateItem& item : p.single)
    for (int32_t id : item.ids)
      if (id >= vocab_size)
        fail(DT_ERR_IO, where + ": post_processor special_tokens name id " + std::to_string(id) +
                            ", outside the vocabulary [0, " + std::to_string(vocab_size) + "); accepted: ids of tokens");
  for (const PostProcessor& item : p.items) check_template_ids(item, vocab_size, where);
}

}  // namespace

void Impl::finish_build() {
  vocab_size = model.id_end();
  for (const AddedToken& a : added) vocab_size = std::max(vocab_size, a.id + 1);
  const auto n = static_cast<size_t>(vocab_size);
  token_of.assign(n, std::string());
  known.assign(n, 0);
  special.assign(n, 0);
  special_skip.assign(n, 0);
  for (int32_t id = 0; id < model.id_end(); ++id)
    if (const std::string* t = model.id_to_token(id)) {
      token_of[static_cast<size_t>(id)] = *t;
      known[static_cast<size_t>(id)] = 1;
    }
  StrMap specials;
  for (const AddedToken& a : added) {
    // What decode sees for an added token: its normalized form (the package's simple_id_to_token).
    token_of[static_cast<size_t>(a.id)] = a.match;
    known[static_cast<size_t>(a.id)] = 1;
    if (a.special) {
      special[static_cast<size_t>(a.id)] = 1;
      specials.insert(a.content, 1);
    }
  }
  // skip_special_tokens drops a token whose text is a special token's (the package compares text).
  for (size_t id = 0; id < n; ++id) special_skip[id] = known[id] && specials.find(token_of[id]) >= 0;
  if (has_post) check_template_ids(post, vocab_size, where);
}

void Impl::encode(std::string_view text, bool add_special, std::vector<int32_t>& out) const {
  out.clear();
  std::string clean;
  if (!utf8_valid(text)) {
    clean = utf8_replace_invalid(text);
    text = clean;
  }
  PreCtx ctx;
  ctx.str.resize(2 * static_cast<size_t>(pre_slots));
  ctx.spans.resize(static_cast<size_t>(pre_slots));
  // One encode at a time uses the shared cache; a concurrent one goes without.
  std::unique_lock<std::mutex> lock(cache_mu, std::try_to_lock);
  ModelSink sink(model, out, lock.owns_lock() ? &cache : nullptr);
  auto push_id = [&](int32_t id) { out.push_back(id); };
  auto pretokenize = [&](std::string_view seg, bool origin) {
    if (pre_tokenizer)
      pre_tokenizer->run(seg, origin, sink, ctx);
    else
      sink.piece(seg, origin);
  };
  std::string norm;
  auto normalized_piece = [&](std::string_view piece, bool origin) {
    norm.assign(piece.data(), piece.size());
    if (normalizer) normalizer->normalize(norm);
    split_added(*this, norm, norm_trie, origin, pretokenize, push_id);
  };
  split_added(*this, text, raw_trie, true, normalized_piece, push_id);
  if (add_special && has_post) post_process(post, out);
}

}  // namespace hft

// ---- HfTokenizer
HfTokenizer HfTokenizer::parse(const std::string& json_text, const std::string& where) {
  auto impl = std::make_shared<hft::Impl>();
  impl->where = where;
  hft::load_json(where, json_text.data(), json_text.size(), *impl);
  return HfTokenizer(std::move(impl));
}

HfTokenizer HfTokenizer::load(const std::string& tokenizer_json_path) {
  const std::vector<char> text = read_file(tokenizer_json_path, kMaxFileBytes, "a tokenizer.json");
  auto impl = std::make_shared<hft::Impl>();
  impl->where = tokenizer_json_path;
  hft::load_json(tokenizer_json_path, text.data(), text.size(), *impl);
  return HfTokenizer(std::move(impl));
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> out;
  impl_->encode(text, add_special_tokens, out);
  return out;
}

namespace {
void check_id(const hft::Impl& impl, int32_t id, const char* what) {
  if (id < 0 || id >= impl.vocab_size)
    invalid(std::string(what) + ": id " + std::to_string(id) + " is outside the vocabulary of " + impl.where +
            "; accepted: [0, " + std::to_string(impl.vocab_size) + ")");
}
}  // namespace

std::string HfTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  const hft::Impl& m = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    check_id(m, id, "HfTokenizer::decode");
    const auto i = static_cast<size_t>(id);
    if (!m.known[i] || (skip_special_tokens && m.special_skip[i])) continue;
    tokens.push_back(m.token_of[i]);
  }
  return hft::decode_tokens(m.has_decoder ? &m.decoder : nullptr, std::move(tokens));
}

int32_t HfTokenizer::vocab_size() const { return impl_->vocab_size; }

int32_t HfTokenizer::token_to_id(const std::string& token) const {
  const int32_t a = impl_->added_by_content.find(token);
  if (a >= 0) return impl_->added[static_cast<size_t>(a)].id;
  return impl_->model.token_to_id(token);
}

std::string HfTokenizer::id_to_token(int32_t id) const {
  check_id(*impl_, id, "HfTokenizer::id_to_token");
  if (!impl_->known[static_cast<size_t>(id)])
    invalid("HfTokenizer::id_to_token: id " + std::to_string(id) + " names no token in " + impl_->where +
            " (a gap in the vocabulary); accepted: ids of tokens");
  return impl_->token_of[static_cast<size_t>(id)];
}

bool HfTokenizer::is_special(int32_t id) const {
  return id >= 0 && id < impl_->vocab_size && impl_->special[static_cast<size_t>(id)];
}

const std::string& HfTokenizer::source() const { return impl_->where; }

// ---- HfStreamDecoder
HfStreamDecoder::HfStreamDecoder(const HfTokenizer& tok, bool skip_special_tokens)
    : impl_(tok.impl_),
      skip_special_(skip_special_tokens),
      pipe_(std::make_unique<hft::StreamPipeline>(impl_->has_decoder ? &impl_->decoder : nullptr)) {}
HfStreamDecoder::~HfStreamDecoder() = default;
HfStreamDecoder::HfStreamDecoder(HfStreamDecoder&&) noexcept = default;
HfStreamDecoder& HfStreamDecoder::operator=(HfStreamDecoder&&) noexcept = default;

std::string HfStreamDecoder::push(int32_t id) {
  check_id(*impl_, id, "HfStreamDecoder::push");
  const auto i = static_cast<size_t>(id);
  if (!impl_->known[i] || (skip_special_ && impl_->special_skip[i])) return std::string();
  return pipe_->push(impl_->token_of[i]);
}

std::string HfStreamDecoder::finish() { return pipe_->finish(); }

}  // namespace dt::io
