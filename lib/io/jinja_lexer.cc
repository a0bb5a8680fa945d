#include "io/jinja_lexer.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "io/jinja.h"
#include "io/jinja_value.h"

namespace dt::io::jinja {

namespace {

// Python's \s*: the end of the whitespace run starting at p.
size_t skip_space(const std::string& s, size_t p) {
  while (p < s.size()) {
    uint32_t c;
    size_t n = utf8_decode_at(s, p, &c);
    if (!py_isspace(c)) break;
    p += n;
  }
  return p;
}

bool all_space(const std::string& s, size_t from) { return skip_space(s, from) == s.size(); }

size_t count_newlines(const std::string& s, size_t b, size_t e) {
  size_t n = 0;
  for (size_t p = b; p < e; ++p) n += s[p] == '\n';
  return n;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A string literal's body as jinja2 decodes it: Python's unicode-escape codec.
std::string unescape(const std::string& raw, int line) {
  std::string out;
  for (size_t p = 0; p < raw.size();) {
    if (raw[p] != '\\') {
      out += raw[p++];
      continue;
    }
    if (p + 1 >= raw.size()) fail_at(line, "a string literal ends with a lone backslash");
    char c = raw[p + 1];
    p += 2;
    switch (c) {
      case '\n': break;  // line continuation
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (size_t k = 0; k < n; ++k) {
          int h = p + k < raw.size() ? hex_value(raw[p + k]) : -1;
          if (h < 0) fail_at(line, std::string("truncated \\") + c + " escape in a string literal");
          cp = cp * 16 + static_cast<uint32_t>(h);
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
          fail_at(line, "a string literal escapes a surrogate or a code point beyond U+10FFFF");
        utf8_append(cp, out);
        p += n;
        break;
      }
      case 'N': fail_at(line, "\\N{...} escapes in string literals are not supported");
      default:
        if (c >= '0' && c <= '7') {
          uint32_t cp = static_cast<uint32_t>(c - '0');
          for (int k = 0; k < 2 && p < raw.size() && raw[p] >= '0' && raw[p] <= '7'; ++k) cp = cp * 8 + (raw[p++] - '0');
          utf8_append(cp, out);
        } else if (static_cast<unsigned char>(c) >= 0x80) {
          // jinja2 first writes non-ASCII as \xNN, \uNNNN or \UNNNNNNNN; after a backslash
          // that escape survives as text.
          uint32_t cp;
          size_t n = utf8_decode_at(raw, p - 1, &cp);
          char buf[16];
          std::snprintf(buf, sizeof buf, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
          out += '\\';
          out += buf;
          p += n - 1;
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Digits with single underscores between them ("1_000"), from p; returns the end.
size_t digit_run(const std::string& s, size_t p) {
  if (p >= s.size() || !is_digit(s[p])) return p;
  ++p;
  while (p < s.size()) {
    if (is_digit(s[p])) ++p;
    else if (s[p] == '_' && p + 1 < s.size() && is_digit(s[p + 1])) p += 2;
    else break;
  }
  return p;
}

std::string without_underscores(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != '_') out += c;
  return out;
}

class Lexer {
 public:
  explicit Lexer(const std::string& src) : s_(src) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < s_.size()) {
      size_t start = find_tag(pos_);
      if (start == std::string::npos) {
        emit_data(s_.substr(pos_), line_);
        line_ += static_cast<int>(count_newlines(s_, pos_, s_.size()));
        pos_ = s_.size();
        break;
      }
      char kind = s_[start + 1];
      char sign = start + 2 < s_.size() && (s_[start + 2] == '-' || s_[start + 2] == '+') ? s_[start + 2] : 0;
      std::string text = s_.substr(pos_, start - pos_);
      int text_line = line_;
      line_ += static_cast<int>(count_newlines(s_, pos_, start));
      if (sign == '-') {
        size_t e = text.size();
        while (e > 0) {  // Python's rstrip(): back over whitespace code points
          size_t b = e - 1;
          while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
          uint32_t c;
          utf8_decode_at(text, b, &c);
          if (!py_isspace(c)) break;
          e = b;
        }
        text.resize(e);
      } else if (sign != '+' && kind != '{') {  // lstrip_blocks: block and comment tags
        size_t nl = text.rfind('\n');
        size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() && all_space(text, l_pos)) text.resize(l_pos);
      }
      emit_data(text, text_line);
      pos_ = start + 2 + (sign ? 1 : 0);
      int tag_line = line_;
      if (kind == '#') {
        line_starting = comment(tag_line);
      } else {
        out_.push_back({kind == '{' ? Tok::VarBegin : Tok::BlockBegin, "", 0, 0, tag_line});
        line_starting = tag(kind, tag_line);
      }
    }
    out_.push_back({Tok::Eof, "", 0, 0, line_});
    return std::move(out_);
  }

 private:
  const std::string& s_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> out_;

  size_t find_tag(size_t from) const {
    for (size_t p = s_.find('{', from); p != std::string::npos; p = s_.find('{', p + 1))
      if (p + 1 < s_.size() && (s_[p + 1] == '{' || s_[p + 1] == '%' || s_[p + 1] == '#')) return p;
    return std::string::npos;
  }

  void emit_data(const std::string& text, int line) {
    if (!text.empty()) out_.push_back({Tok::Data, text, 0, 0, line});
  }

  void advance_to(size_t p) {
    line_ += static_cast<int>(count_newlines(s_, pos_, p));
    pos_ = p;
  }

  // Consumes a tag's end: `-` strips all whitespace after it; a plain block or comment end
  // takes one newline (trim_blocks). Returns whether what it consumed ended a line.
  bool finish_end(size_t after, char sign, bool trims) {
    size_t p = after;
    if (sign == '-') p = skip_space(s_, p);
    else if (sign == 0 && trims && p < s_.size() && s_[p] == '\n') ++p;
    advance_to(p);
    return p > 0 && s_[p - 1] == '\n';
  }

  bool comment(int tag_line) {
    size_t j = s_.find("#}", pos_);
    if (j == std::string::npos) fail_at(tag_line, "a comment ({# ... #}) is never closed");
    char sign = (j > pos_ && (s_[j - 1] == '-' || s_[j - 1] == '+')) ? s_[j - 1] : 0;
    return finish_end(j + 2, sign, true);
  }

  bool tag(char kind, int tag_line) {
    const char close = kind == '{' ? '}' : '%';
    const char* what = kind == '{' ? "an expression tag ({{ ... }})" : "a block tag ({% ... %})";
    std::string balance;
    for (;;) {
      if (pos_ >= s_.size())
        fail_at(tag_line, std::string(what) + " is never closed");
      if (balance.empty()) {
        char sign = (s_[pos_] == '-' || (s_[pos_] == '+' && kind == '%')) ? s_[pos_] : 0;
        size_t q = pos_ + (sign ? 1 : 0);
        if (q + 1 < s_.size() && s_[q] == close && s_[q + 1] == '}') {
          bool ls = finish_end(q + 2, sign, kind == '%');
          out_.push_back({kind == '{' ? Tok::VarEnd : Tok::BlockEnd, "", 0, 0, line_});
          return ls;
        }
      }
      size_t ws = skip_space(s_, pos_);
      if (ws != pos_) {
        advance_to(ws);
        continue;
      }
      token(balance, tag_line);
    }
  }

  void token(std::string& balance, int tag_line) {
    const char c = s_[pos_];
    const int line = line_;
    if (is_digit(c)) {
      number(line);
      return;
    }
    if (is_name_start(c)) {
      size_t e = pos_;
      while (e < s_.size() && is_name_char(s_[e])) ++e;
      out_.push_back({Tok::Name, s_.substr(pos_, e - pos_), 0, 0, line});
      pos_ = e;
      return;
    }
    if (c == '\'' || c == '"') {
      size_t e = pos_ + 1;
      while (e < s_.size() && s_[e] != c) e += s_[e] == '\\' ? 2 : 1;
      if (e >= s_.size()) fail_at(line, "a string literal is never closed");
      out_.push_back({Tok::String, unescape(s_.substr(pos_ + 1, e - pos_ - 1), line), 0, 0, line});
      advance_to(e + 1);
      return;
    }
    static const char* const two[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : two)
      if (s_.compare(pos_, 2, op) == 0) {
        out_.push_back({Tok::Op, op, 0, 0, line});
        pos_ += 2;
        return;
      }
    static const std::string one = "+-/*%~[](){}><=.:|,;";
    if (one.find(c) == std::string::npos) {
      uint32_t cp;
      utf8_decode_at(s_, pos_, &cp);
      char buf[96];
      std::snprintf(buf, sizeof buf, "unexpected character %s%c%s (U+%04X) inside a tag",
                    cp < 0x80 && cp >= 0x20 ? "'" : "", cp < 0x80 && cp >= 0x20 ? c : ' ',
                    cp < 0x80 && cp >= 0x20 ? "'" : "", cp);
      fail_at(line, buf);
    }
    if (c == '(' || c == '[' || c == '{') {
      balance += c == '(' ? ')' : c == '[' ? ']' : '}';
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail_at(line, std::string("unexpected '") + c + "'");
      if (balance.back() != c)
        fail_at(line, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
      balance.pop_back();
    }
    (void)tag_line;
    out_.push_back({Tok::Op, std::string(1, c), 0, 0, line});
    ++pos_;
  }

  void number(int line) {
    const size_t b = pos_;
    // A float: digits, then a fraction and/or an exponent (not right after a '.').
    bool after_dot = b > 0 && s_[b - 1] == '.';
    size_t e = digit_run(s_, b);
    size_t f = e;
    bool is_float = false;
    if (!after_dot) {
      if (f + 1 < s_.size() && s_[f] == '.' && is_digit(s_[f + 1])) {
        f = digit_run(s_, f + 1);
        is_float = true;
      }
      if (f < s_.size() && (s_[f] == 'e' || s_[f] == 'E')) {
        size_t g = f + 1;
        if (g < s_.size() && (s_[g] == '+' || s_[g] == '-')) ++g;
        size_t h = digit_run(s_, g);
        if (h > g) {
          f = h;
          is_float = true;
        }
      }
    }
    if (is_float) {
      Token t{Tok::Float, "", 0, 0, line};
      t.fval = std::strtod(without_underscores(s_.substr(b, f - b)).c_str(), nullptr);
      out_.push_back(t);
      pos_ = f;
      return;
    }
    // Integers: 0b / 0o / 0x prefixes, or decimal without leading zeros ("0", "0_0" allowed).
    int base = 10;
    size_t digits_from = b;
    if (s_[b] == '0' && b + 1 < s_.size()) {
      char p = static_cast<char>(s_[b + 1] | 0x20);
      base = p == 'b' ? 2 : p == 'o' ? 8 : p == 'x' ? 16 : 10;
      if (base != 10) digits_from = b + 2;
    }
    size_t q = digits_from;
    if (base != 10) {
      while (q < s_.size() && (hex_value(s_[q]) >= 0 && hex_value(s_[q]) < base)) ++q;
      if (q == digits_from) base = 10, q = b + 1;  // "0" followed by a name
    } else if (s_[b] == '0') {
      q = b + 1;
      while (q + 1 < s_.size() && s_[q] == '_' && s_[q + 1] == '0') q += 2;
      while (q < s_.size() && s_[q] == '0') ++q;
    } else {
      q = e;
    }
    std::string digits = without_underscores(s_.substr(base == 10 ? b : digits_from, q - (base == 10 ? b : digits_from)));
    errno = 0;
    char* endp = nullptr;
    unsigned long long v = std::strtoull(digits.c_str(), &endp, base);
    if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX))
      fail_at(line, "integer literal " + s_.substr(b, q - b) + " does not fit in 64 bits");
    Token t{Tok::Int, "", static_cast<int64_t>(v), 0, line};
    out_.push_back(t);
    pos_ = q;
  }
};

}  // namespace

std::vector<Token> lex(const std::string& source) {
  // Newlines become \n and one trailing newline goes (keep_trailing_newline=False).
  std::string s;
  s.reserve(source.size());
  for (size_t p = 0; p < source.size(); ++p) {
    if (source[p] == '\r') {
      s += '\n';
      if (p + 1 < source.size() && source[p + 1] == '\n') ++p;
    } else {
      s += source[p];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return Lexer(s).run();
}

}  // namespace dt::io::jinja
