// Normalizers and pre-tokenizers of io/hf_tokenizer.h, each doing what the `tokenizers`
// package's does to one piece of text. A pre-tokenizer hands its pieces straight to the next
// one (a Sequence chains them), so a piece is never copied unless its text changes.
#include <algorithm>

#include "core/error.h"
#include "io/hf_tok_internal.h"

namespace dt::io::hft {
namespace {

// ---- normalizers
class Nfc final : public Normalizer {
 public:
  void normalize(std::string& s) const override { s = nfc(s); }
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string p) : p_(std::move(p)) {}
  void normalize(std::string& s) const override {
    if (!s.empty()) s.insert(0, p_);
  }

 private:
  std::string p_;
};

class Replace final : public Normalizer {
 public:
  Replace(std::unique_ptr<Regex> re, std::string content) : re_(std::move(re)), content_(std::move(content)) {}
  void normalize(std::string& s) const override {
    thread_local std::vector<Span> spans;
    re_->spans(s, spans);
    std::string out;
    out.reserve(s.size());
    for (const Span& sp : spans) {
      if (sp.match)
        out += content_;
      else
        out.append(s, sp.start, sp.end - sp.start);
    }
    s.swap(out);
  }

 private:
  std::unique_ptr<Regex> re_;
  std::string content_;
};

class NormSequence final : public Normalizer {
 public:
  explicit NormSequence(std::vector<std::unique_ptr<Normalizer>> items) : items_(std::move(items)) {}
  void normalize(std::string& s) const override {
    for (const auto& n : items_) n->normalize(s);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> items_;
};

// ---- splitting
// The package's find_matches for a character predicate: each matching character is a match
// of its own, the runs between are gaps.
template <class Pred>
void char_spans(std::string_view s, Pred pred, std::vector<Span>& out) {
  out.clear();
  if (s.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  size_t gap = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t n = u8len(static_cast<unsigned char>(s[i]));
    if (pred(s.data() + i, n)) {
      if (gap < i) out.push_back({gap, i, false});
      out.push_back({i, i + n, true});
      gap = i + n;
    }
    i += n;
  }
  if (gap < s.size()) out.push_back({gap, s.size(), false});
}

// NormalizedString::split's behaviors, in place: the kept pieces come back with match = false,
// the removed ones are dropped.
void apply_behavior(std::vector<Span>& spans, Behavior b) {
  std::vector<Span> acc;
  acc.reserve(spans.size());
  bool prev_match = false;
  switch (b) {
    case Behavior::Isolated:
      for (Span& s : spans) s.match = false;
      return;
    case Behavior::Removed:
      for (const Span& s : spans)
        if (!s.match) acc.push_back(s);
      break;
    case Behavior::Contiguous:
      for (const Span& s : spans) {
        if (s.match == prev_match && !acc.empty())
          acc.back().end = s.end;
        else
          acc.push_back({s.start, s.end, false});
        prev_match = s.match;
      }
      break;
    case Behavior::MergedWithPrevious:
      for (const Span& s : spans) {
        if (s.match && !prev_match && !acc.empty())
          acc.back().end = s.end;
        else
          acc.push_back({s.start, s.end, false});
        prev_match = s.match;
      }
      break;
    case Behavior::MergedWithNext:
      for (size_t k = spans.size(); k-- > 0;) {
        const Span& s = spans[k];
        if (s.match && !prev_match && !acc.empty())
          acc.back().start = s.start;
        else
          acc.push_back({s.start, s.end, false});
        prev_match = s.match;
      }
      std::reverse(acc.begin(), acc.end());
      break;
  }
  spans.swap(acc);
}

void emit(std::string_view s, const std::vector<Span>& kept, bool at_origin, PieceSink& next) {
  for (const Span& k : kept)
    if (k.end > k.start) next.piece(s.substr(k.start, k.end - k.start), at_origin && k.start == 0);
}

// ---- pre-tokenizers
class ByteLevelPre final : public PreTokenizer {
 public:
  ByteLevelPre(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    if (use_regex)
      re_ = std::make_unique<Regex>(
          "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", false,
          "the ByteLevel pre-tokenizer's regex");
  }
  void run(std::string_view in, bool at_origin, PieceSink& next, PreCtx& ctx) const override {
    std::string_view s = in;
    if (add_prefix_space_ && !in.empty() && in[0] != ' ') {
      std::string& p = ctx.str[2 * static_cast<size_t>(slot) + 1];
      p.assign(1, ' ');
      p.append(in.data(), in.size());
      s = p;
    }
    std::string& mapped = ctx.str[2 * static_cast<size_t>(slot)];
    auto map_emit = [&](std::string_view piece, bool origin) {
      mapped.clear();
      for (char ch : piece) mapped += byte_char(static_cast<uint8_t>(ch));
      next.piece(mapped, origin);
    };
    if (!re_) {
      map_emit(s, at_origin);
      return;
    }
    std::vector<Span>& spans = ctx.spans[static_cast<size_t>(slot)];
    re_->spans(s, spans);
    for (const Span& sp : spans)
      if (sp.end > sp.start) map_emit(s.substr(sp.start, sp.end - sp.start), at_origin && sp.start == 0);
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> re_;
};

class SplitPre final : public PreTokenizer {
 public:
  SplitPre(std::unique_ptr<Regex> re, Behavior b, bool invert) : re_(std::move(re)), b_(b), invert_(invert) {}
  void run(std::string_view in, bool at_origin, PieceSink& next, PreCtx& ctx) const override {
    std::vector<Span>& spans = ctx.spans[static_cast<size_t>(slot)];
    re_->spans(in, spans);
    if (invert_)
      for (Span& s : spans) s.match = !s.match;
    apply_behavior(spans, b_);
    emit(in, spans, at_origin, next);
  }

 private:
  std::unique_ptr<Regex> re_;
  Behavior b_;
  bool invert_;
};

class MetaspacePre final : public PreTokenizer {
 public:
  MetaspacePre(std::string rep, int scheme, bool split) : rep_(std::move(rep)), scheme_(scheme), split_(split) {}
  void run(std::string_view in, bool at_origin, PieceSink& next, PreCtx& ctx) const override {
    std::string& s = ctx.str[2 * static_cast<size_t>(slot)];
    s.clear();
    for (char ch : in) {
      if (ch == ' ')
        s += rep_;
      else
        s += ch;
    }
    const bool starts = s.compare(0, rep_.size(), rep_) == 0;
    if (!starts && (scheme_ == kAlways || (scheme_ == kFirst && at_origin))) s.insert(0, rep_);
    if (!split_) {
      next.piece(s, at_origin);
      return;
    }
    std::vector<Span>& spans = ctx.spans[static_cast<size_t>(slot)];
    const std::string& rep = rep_;
    char_spans(s, [&](const char* p, size_t n) { return n == rep.size() && rep.compare(0, n, p, n) == 0; }, spans);
    apply_behavior(spans, Behavior::MergedWithNext);
    emit(s, spans, at_origin, next);
  }

 private:
  std::string rep_;
  int scheme_;
  bool split_;
};

class DigitsPre final : public PreTokenizer {
 public:
  explicit DigitsPre(bool individual) : individual_(individual) {}
  void run(std::string_view in, bool at_origin, PieceSink& next, PreCtx& ctx) const override {
    std::vector<Span>& spans = ctx.spans[static_cast<size_t>(slot)];
    char_spans(in, [](const char* p, size_t) { return is_numeric(u8decode(p)); }, spans);
    apply_behavior(spans, individual_ ? Behavior::Isolated : Behavior::Contiguous);
    emit(in, spans, at_origin, next);
  }

 private:
  bool individual_;
};

class PreSequence final : public PreTokenizer {
 public:
  explicit PreSequence(std::vector<std::unique_ptr<PreTokenizer>> items) : items_(std::move(items)) {}
  void run(std::string_view in, bool at_origin, PieceSink& next, PreCtx& ctx) const override {
    if (items_.empty()) {
      next.piece(in, at_origin);
      return;
    }
    Chain first(this, 0, next, ctx);
    items_[0]->run(in, at_origin, first.as_sink_of_next(), ctx);
  }

 private:
  // The sink after items_[i]: hands each piece to items_[i + 1], or to `last` after the end.
  class Chain final : public PieceSink {
   public:
    Chain(const PreSequence* seq, size_t i, PieceSink& last, PreCtx& ctx) : seq_(seq), i_(i), last_(last), ctx_(ctx) {}
    PieceSink& as_sink_of_next() { return *this; }
    void piece(std::string_view p, bool at_origin) override {
      if (i_ + 1 == seq_->items_.size()) {
        last_.piece(p, at_origin);
        return;
      }
      Chain after(seq_, i_ + 1, last_, ctx_);
      seq_->items_[i_ + 1]->run(p, at_origin, after, ctx_);
    }

   private:
    const PreSequence* seq_;
    size_t i_;
    PieceSink& last_;
    PreCtx& ctx_;
  };
  std::vector<std::unique_ptr<PreTokenizer>> items_;
};

}  // namespace

std::unique_ptr<Normalizer> make_nfc() { return std::make_unique<Nfc>(); }
std::unique_ptr<Normalizer> make_prepend(std::string prepend) { return std::make_unique<Prepend>(std::move(prepend)); }
std::unique_ptr<Normalizer> make_replace(std::unique_ptr<Regex> pattern, std::string content) {
  return std::make_unique<Replace>(std::move(pattern), std::move(content));
}
std::unique_ptr<Normalizer> make_normalizer_sequence(std::vector<std::unique_ptr<Normalizer>> items) {
  return std::make_unique<NormSequence>(std::move(items));
}
std::unique_ptr<PreTokenizer> make_byte_level_pre(bool add_prefix_space, bool use_regex) {
  return std::make_unique<ByteLevelPre>(add_prefix_space, use_regex);
}
std::unique_ptr<PreTokenizer> make_split(std::unique_ptr<Regex> pattern, Behavior behavior, bool invert) {
  return std::make_unique<SplitPre>(std::move(pattern), behavior, invert);
}
std::unique_ptr<PreTokenizer> make_metaspace_pre(std::string replacement, int prepend_scheme, bool split) {
  return std::make_unique<MetaspacePre>(std::move(replacement), prepend_scheme, split);
}
std::unique_ptr<PreTokenizer> make_digits(bool individual) { return std::make_unique<DigitsPre>(individual); }
std::unique_ptr<PreTokenizer> make_pre_sequence(std::vector<std::unique_ptr<PreTokenizer>> items) {
  return std::make_unique<PreSequence>(std::move(items));
}

}  // namespace dt::io::hft
