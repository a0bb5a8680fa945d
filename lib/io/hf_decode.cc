// Decoders of io/hf_tokenizer.h, twice: as the `tokenizers` package runs them (a list of token
// strings through each decoder's decode_chain, then joined), and as streaming stages that pass
// a token on in pieces as soon as no later token can change them (HfStreamDecoder).
#include <algorithm>

#include "core/error.h"
#include "io/hf_tok_internal.h"

namespace dt::io::hft {
namespace {

const char kReplacementChar[] = "\xEF\xBF\xBD";

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    out += v[i];
  }
  return out;
}

std::string replace_all(std::string_view s, const std::string& pat, const std::string& with) {
  std::string out;
  size_t from = 0;
  for (size_t at = s.find(pat); at != std::string_view::npos; at = s.find(pat, from)) {
    out.append(s.data() + from, at - from);
    out += with;
    from = at + pat.size();
  }
  out.append(s.data() + from, s.size() - from);
  return out;
}

// GPT-2's table backwards; a token with a character outside it stands for its own bytes.
void token_bytes(const std::string& tok, std::string& out) {
  const size_t mark = out.size();
  for (size_t i = 0; i < tok.size();) {
    const int b = char_byte(u8decode(tok.data() + i));
    if (b < 0) {
      out.resize(mark);
      out += tok;
      return;
    }
    out += static_cast<char>(b);
    i += u8len(static_cast<unsigned char>(tok[i]));
  }
}

// The byte of a "<0xNN>" token (Rust's u8::from_str_radix(.., 16) on the two characters,
// which also takes "+N"), or -1.
int fallback_byte(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
  };
  const int lo = hex(t[4]);
  if (lo < 0) return -1;
  if (t[3] == '+') return lo;
  const int hi = hex(t[3]);
  return hi < 0 ? -1 : hi * 16 + lo;
}

void metaspace_map(std::string_view tok, const std::string& rep, bool drop, std::string& out) {
  for (size_t i = 0; i < tok.size();) {
    const size_t n = u8len(static_cast<unsigned char>(tok[i]));
    if (tok.compare(i, n, rep) == 0) {
      if (!drop) out += ' ';
    } else {
      out.append(tok.data() + i, n);
    }
    i += n;
  }
}

std::vector<std::string> chain(const Decoder& d, std::vector<std::string> toks) {
  std::vector<std::string> out;
  switch (d.kind) {
    case Decoder::ByteLevel: {
      std::string bytes;
      for (const std::string& t : toks) token_bytes(t, bytes);
      out.push_back(utf8_replace_invalid(bytes));
      return out;
    }
    case Decoder::Metaspace:
      for (size_t i = 0; i < toks.size(); ++i) {
        out.emplace_back();
        metaspace_map(toks[i], d.a, i == 0 && d.prepend_scheme != kNever, out.back());
      }
      return out;
    case Decoder::Replace:
      for (const std::string& t : toks) out.push_back(replace_all(t, d.a, d.b));
      return out;
    case Decoder::ByteFallback: {
      std::string run;
      auto flush = [&] {
        if (run.empty()) return;
        if (utf8_valid(run))
          out.push_back(run);
        else
          out.insert(out.end(), run.size(), kReplacementChar);
        run.clear();
      };
      for (std::string& t : toks) {
        const int b = fallback_byte(t);
        if (b >= 0) {
          run += static_cast<char>(b);
          continue;
        }
        flush();
        out.push_back(std::move(t));
      }
      flush();
      return out;
    }
    case Decoder::Fuse:
      out.push_back(join(toks, ""));
      return out;
    case Decoder::Strip:
      for (const std::string& t : toks) {
        std::vector<size_t> at;  // character starts
        for (size_t i = 0; i < t.size(); i += u8len(static_cast<unsigned char>(t[i]))) at.push_back(i);
        auto is_content = [&](size_t k) {
          const size_t e = k + 1 < at.size() ? at[k + 1] : t.size();
          return t.compare(at[k], e - at[k], d.a) == 0;
        };
        size_t start_cut = 0, stop_cut = at.size();
        for (size_t k = 0; k < at.size() && k < d.start && is_content(k); ++k) start_cut = k + 1;
        for (size_t k = 0; k < d.stop && k < at.size() && is_content(at.size() - k - 1); ++k) stop_cut = at.size() - k - 1;
        // (stop_cut below start_cut makes the package panic; this gives "")
        const size_t b = start_cut < at.size() ? at[start_cut] : t.size();
        const size_t e = stop_cut < at.size() ? at[stop_cut] : t.size();
        out.push_back(e > b ? t.substr(b, e - b) : std::string());
      }
      return out;
    case Decoder::Sequence:
      for (const Decoder& item : d.items) toks = chain(item, std::move(toks));
      return toks;
  }
  return out;
}

}  // namespace

std::string decode_tokens(const Decoder* decoder, std::vector<std::string> tokens) {
  if (!decoder) return join(tokens, " ");
  return join(chain(*decoder, std::move(tokens)), "");
}

// ---- streaming
struct StreamPipeline::Stage {
  virtual ~Stage() = default;
  virtual void push(Piece&& p, std::vector<Piece>& out) = 0;
  virtual void finish(std::vector<Piece>& out) = 0;  // every token has ended: flush, reset
};

namespace {

using Stage = StreamPipeline::Stage;

// A stage that needs whole tokens gathers the pieces of one.
class WholeTokenStage : public Stage {
 public:
  void push(Piece&& p, std::vector<Piece>& out) final {
    if (p.begin && p.end) return token(std::move(p.text), out);
    if (p.begin) buf_.clear();
    buf_ += p.text;
    if (p.end) token(std::move(buf_), out);
  }

 protected:
  virtual void token(std::string t, std::vector<Piece>& out) = 0;

 private:
  std::string buf_;
};

class ByteLevelStage final : public WholeTokenStage {
 public:
  void finish(std::vector<Piece>& out) override {
    out.push_back({lossy_.finish(), !started_, true});
    started_ = false;
  }

 private:
  void token(std::string t, std::vector<Piece>& out) override {
    bytes_.clear();
    token_bytes(t, bytes_);
    std::string text = lossy_.push(bytes_);
    if (text.empty()) return;
    out.push_back({std::move(text), !started_, false});
    started_ = true;
  }
  Utf8Lossy lossy_;
  std::string bytes_;
  bool started_ = false;
};

class MetaspaceStage final : public Stage {
 public:
  MetaspaceStage(std::string rep, int scheme) : rep_(std::move(rep)), scheme_(scheme) {}
  void push(Piece&& p, std::vector<Piece>& out) override {
    if (p.begin) ++index_;
    std::string t;
    metaspace_map(p.text, rep_, index_ == 1 && scheme_ != kNever, t);
    out.push_back({std::move(t), p.begin, p.end});
  }
  void finish(std::vector<Piece>&) override { index_ = 0; }

 private:
  std::string rep_;
  int scheme_;
  size_t index_ = 0;  // tokens begun
};

class ReplaceStage final : public Stage {
 public:
  ReplaceStage(std::string pat, std::string with) : pat_(std::move(pat)), with_(std::move(with)) {}
  void push(Piece&& p, std::vector<Piece>& out) override {
    if (p.begin) {
      held_.clear();
      begin_ = true;
    }
    held_ += p.text;
    std::string text;
    if (p.end) {
      text = replace_all(held_, pat_, with_);
      held_.clear();
    } else {
      // Emit up to where a match could still start and run into the next piece.
      size_t cut = held_.size();
      for (size_t k = std::min(held_.size(), pat_.size() - 1); k > 0; --k)
        if (held_.compare(held_.size() - k, k, pat_, 0, k) == 0) {
          cut = held_.size() - k;
          break;
        }
      // A match that starts before `cut` ends before the held text does (else it would start at
      // or after `cut`), so the text before the last match boundary below `cut` is final.
      size_t from = 0, done = 0;
      for (size_t at = held_.find(pat_); at != std::string::npos && at < cut; at = held_.find(pat_, from)) {
        text.append(held_, from, at - from);
        text += with_;
        from = done = at + pat_.size();
      }
      const size_t upto = std::max(cut, done);
      text.append(held_, from, upto - from);
      held_.erase(0, upto);
      if (text.empty()) return;
    }
    out.push_back({std::move(text), begin_, p.end});
    begin_ = false;
  }
  void finish(std::vector<Piece>&) override { held_.clear(); }

 private:
  std::string pat_, with_, held_;
  bool begin_ = false;
};

class ByteFallbackStage final : public WholeTokenStage {
 public:
  void finish(std::vector<Piece>& out) override { flush(out); }

 private:
  void token(std::string t, std::vector<Piece>& out) override {
    const int b = fallback_byte(t);
    if (b >= 0) {
      run_ += static_cast<char>(b);
      return;
    }
    flush(out);
    out.push_back({std::move(t), true, true});
  }
  void flush(std::vector<Piece>& out) {
    if (run_.empty()) return;
    if (utf8_valid(run_)) {
      out.push_back({run_, true, true});
    } else {
      for (size_t i = 0; i < run_.size(); ++i) out.push_back({kReplacementChar, true, true});
    }
    run_.clear();
  }
  std::string run_;
};

class FuseStage final : public Stage {
 public:
  void push(Piece&& p, std::vector<Piece>& out) override {
    out.push_back({std::move(p.text), !started_, false});
    started_ = true;
  }
  void finish(std::vector<Piece>& out) override {
    out.push_back({std::string(), !started_, true});
    started_ = false;
  }

 private:
  bool started_ = false;
};

class StripStage final : public Stage {
 public:
  StripStage(std::string content, size_t start, size_t stop) : c_(std::move(content)), start_(start), stop_(stop) {}
  void push(Piece&& p, std::vector<Piece>& out) override {
    if (p.begin) {
      lead_left_ = start_;
      held_ = 0;
      begin_ = true;
    }
    std::string text;
    for (size_t i = 0; i < p.text.size();) {
      const size_t n = u8len(static_cast<unsigned char>(p.text[i]));
      const bool is_c = p.text.compare(i, n, c_) == 0;
      if (lead_left_ > 0) {
        --lead_left_;
        if (is_c) {
          i += n;
          continue;
        }
        lead_left_ = 0;
      }
      if (is_c && stop_ > 0) {
        ++held_;  // perhaps trailing: decided at the token's end
      } else {
        for (; held_ > 0; --held_) text += c_;
        text.append(p.text, i, n);
      }
      i += n;
    }
    if (p.end) {
      for (size_t k = held_ > stop_ ? held_ - stop_ : 0; k > 0; --k) text += c_;
      held_ = 0;
    } else if (text.empty()) {
      return;
    }
    out.push_back({std::move(text), begin_, p.end});
    begin_ = false;
  }
  void finish(std::vector<Piece>&) override { held_ = 0; }

 private:
  std::string c_;
  size_t start_, stop_;
  size_t lead_left_ = 0, held_ = 0;
  bool begin_ = false;
};

void add_stages(const Decoder& d, std::vector<std::unique_ptr<Stage>>& st) {
  switch (d.kind) {
    case Decoder::ByteLevel: st.push_back(std::make_unique<ByteLevelStage>()); break;
    case Decoder::Metaspace: st.push_back(std::make_unique<MetaspaceStage>(d.a, d.prepend_scheme)); break;
    case Decoder::Replace: st.push_back(std::make_unique<ReplaceStage>(d.a, d.b)); break;
    case Decoder::ByteFallback: st.push_back(std::make_unique<ByteFallbackStage>()); break;
    case Decoder::Fuse: st.push_back(std::make_unique<FuseStage>()); break;
    case Decoder::Strip: st.push_back(std::make_unique<StripStage>(d.a, d.start, d.stop)); break;
    case Decoder::Sequence:
      for (const Decoder& item : d.items) add_stages(item, st);
      break;
  }
}

}  // namespace

StreamPipeline::StreamPipeline(const Decoder* decoder) : join_with_space_(decoder == nullptr) {
  if (decoder) add_stages(*decoder, stages_);
}
StreamPipeline::~StreamPipeline() = default;

std::string StreamPipeline::run(size_t from, std::vector<Piece> pieces) {
  std::vector<Piece> next;
  for (size_t i = from; i < stages_.size() && !pieces.empty(); ++i) {
    next.clear();
    for (Piece& p : pieces) stages_[i]->push(std::move(p), next);
    pieces.swap(next);
  }
  std::string out;
  for (const Piece& p : pieces) out += p.text;
  return out;
}

std::string StreamPipeline::push(const std::string& token) {
  if (join_with_space_) {
    std::string out = first_token_ ? token : " " + token;
    first_token_ = false;
    return out;
  }
  std::vector<Piece> one;
  one.push_back({token, true, true});
  return run(0, std::move(one));
}

std::string StreamPipeline::finish() {
  first_token_ = true;
  std::string out;
  for (size_t i = 0; i < stages_.size(); ++i) {
    std::vector<Piece> flushed;
    stages_[i]->finish(flushed);
    out += run(i + 1, std::move(flushed));
  }
  return out;
}

}  // namespace dt::io::hft
