// The tokenizer.json regular expressions: Oniguruma (Ruby syntax, as the `tokenizers`
// package compiles them) carried over to PCRE2 (UTF, UCP, JIT), and matched with onig's
// find_iter rules.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "io/hf_tok_internal.h"

namespace dt::io::hft {
namespace {

// Oniguruma's classes for Unicode text (its doc/RE), written for PCRE2: \s is White_Space
// (tab..CR, NEL, Zs, Zl, Zp); \w is Letter, Mark, Number, Connector_Punctuation; \h hex digits.
const char kSpace[] = "\\t\\n\\x0B\\f\\r\\x{85}\\p{Z}";
const char kWord[] = "\\p{L}\\p{M}\\p{N}\\p{Pc}";
const char kHexClass[] = "0-9a-fA-F";

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

[[noreturn]] void refuse(const std::string& where, const std::string& pattern, const std::string& what) {
  fail(DT_ERR_IO, where + " \"" + pattern + "\": " + what +
                      " is not supported (its meaning differs between Oniguruma, which the tokenizers "
                      "package uses, and PCRE2); accepted: the rest of the Oniguruma syntax");
}

}  // namespace

std::string onig_to_pcre2(const std::string& p, const std::string& where) {
  std::string out;
  bool in_class = false;
  size_t i = 0;
  const size_t n = p.size();
  auto cls = [&](const char* body, bool negated, const char* name) {
    if (in_class) {
      if (negated) refuse(where, p, std::string("\"\\") + name + "\" inside a character class");
      out += body;
    } else {
      out += negated ? "[^" : "[";
      out += body;
      out += "]";
    }
  };
  while (i < n) {
    const char c = p[i];
    if (c == '\\') {
      if (i + 1 >= n) fail(DT_ERR_IO, where + " \"" + p + "\": the pattern ends with a backslash");
      const char e = p[i + 1];
      i += 2;
      switch (e) {
        case 's': cls(kSpace, false, "s"); break;
        case 'S': cls(kSpace, true, "S"); break;
        case 'w': cls(kWord, false, "w"); break;
        case 'W': cls(kWord, true, "W"); break;
        case 'h': cls(kHexClass, false, "h"); break;
        case 'H': cls(kHexClass, true, "H"); break;
        case 'v': out += "\\x0B"; break;
        case 'u':  // \uHHHH
          if (i + 4 > n || !is_hex(p[i]) || !is_hex(p[i + 1]) || !is_hex(p[i + 2]) || !is_hex(p[i + 3]))
            refuse(where, p, "\"\\u\" without four hex digits");
          out += "\\x{" + p.substr(i, 4) + "}";
          i += 4;
          break;
        case 'b':
          if (!in_class) refuse(where, p, "the word boundary \"\\b\"");
          out += "\\x08";
          break;
        case 'd': case 'D': case 'p': case 'P': case 'x': case 'n': case 'r': case 't': case 'f': case 'e':
        case 'a': case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': case '8':
        case '9': case 'k':
          out += '\\';
          out += e;
          break;
        case 'A': case 'z': case 'Z': case 'G':
          if (in_class) refuse(where, p, std::string("\"\\") + e + "\" inside a character class");
          out += '\\';
          out += e;
          break;
        default:
          if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z'))
            refuse(where, p, std::string("the escape \"\\") + e + "\"");
          out += '\\';
          out += e;  // an escaped symbol: itself in both
      }
      continue;
    }
    if (in_class) {
      if (c == '[') refuse(where, p, p.compare(i, 2, "[:") == 0 ? "a POSIX bracket \"[:...:]\"" : "a nested character class");
      if (c == '&' && i + 1 < n && p[i + 1] == '&') refuse(where, p, "class intersection \"&&\"");
      if (c == ']') in_class = false;
      out += c;
      ++i;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      ++i;
      if (i < n && p[i] == '^') out += p[i++];
      if (i < n && p[i] == ']') refuse(where, p, "a \"]\" first in a character class");
      continue;
    }
    if (c == '(' && i + 1 < n && p[i + 1] == '?') {
      const char k = i + 2 < n ? p[i + 2] : '\0';
      if (k == ':' || k == '=' || k == '!' || k == '>' || k == '<') {
        out += "(?";
        i += 2;
        continue;  // (?<name> and (?<= (?<! are the same in both
      }
      // Inline options: only i (case folding) means the same in both.
      size_t j = i + 2;
      while (j < n && (p[j] == 'i' || p[j] == '-')) ++j;
      if (j == i + 2 || j >= n || (p[j] != ':' && p[j] != ')'))
        refuse(where, p, "the group \"" + p.substr(i, std::min<size_t>(4, n - i)) + "...\" (inline options other than i)");
      out += p.substr(i, j - i);
      i = j;
      continue;
    }
    if (c == '{' && i + 1 < n && p[i + 1] == ',') {  // Oniguruma's {,n} is {0,n}
      size_t j = i + 2;
      while (j < n && p[j] >= '0' && p[j] <= '9') ++j;
      if (j > i + 2 && j < n && p[j] == '}') {
        out += "{0";
        ++i;
        continue;
      }
    }
    out += c;
    ++i;
  }
  if (in_class) fail(DT_ERR_IO, where + " \"" + p + "\": a character class is not closed");
  return out;
}

namespace {

// Each thread's match data, JIT stack and match context (a JIT stack is one thread's).
struct ThreadMatch {
  pcre2_match_data* md = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* mc = nullptr;
  ThreadMatch() {
    md = pcre2_match_data_create(1, nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
    mc = pcre2_match_context_create(nullptr);
    if (!md || !stack || !mc) fail(DT_ERR_OUT_OF_MEMORY, "PCRE2: cannot allocate match data");
    pcre2_jit_stack_assign(mc, nullptr, stack);
    pcre2_set_match_limit(mc, 50'000'000);  // a hostile pattern fails instead of running for hours
  }
  ~ThreadMatch() {
    pcre2_match_context_free(mc);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(md);
  }
};
ThreadMatch& thread_match() {
  thread_local ThreadMatch t;
  return t;
}

}  // namespace

Regex::Regex(const std::string& pattern, bool literal, const std::string& where) {
  if (pattern.empty()) fail(DT_ERR_IO, where + ": an empty pattern is not supported; accepted: a non-empty one");
  if (literal) {
    literal_ = pattern;
    return;
  }
  const std::string translated = onig_to_pcre2(pattern, where);
  pcre2_compile_context* cc = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
  int err = 0;
  PCRE2_SIZE at = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_ALT_CIRCUMFLEX |
                                       PCRE2_NEVER_BACKSLASH_C,
                                   &err, &at, cc);
  pcre2_compile_context_free(cc);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    fail(DT_ERR_IO, where + " \"" + pattern + "\" does not compile (PCRE2, at offset " + std::to_string(at) +
                        " of \"" + translated + "\"): " + reinterpret_cast<const char*>(msg));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // without JIT (unsupported CPU) it is interpreted
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const {
  out.clear();
  if (code_ == nullptr) {
    for (size_t pos = s.find(literal_); pos != std::string_view::npos; pos = s.find(literal_, pos + literal_.size()))
      out.emplace_back(pos, pos + literal_.size());
    return;
  }
  ThreadMatch& tm = thread_match();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t last_end = 0;
  bool skip_next_empty = false;
  while (last_end <= s.size()) {
    const int rc = pcre2_match(static_cast<const pcre2_code*>(code_), subject, s.size(), last_end, PCRE2_NO_UTF_CHECK,
                               tm.md, tm.mc);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      fail(DT_ERR_INVALID_ARGUMENT, std::string("tokenizer regex: matching failed: ") +
                                        reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(tm.md);
    const size_t st = ov[0], en = ov[1];
    last_end = en;
    // As the onig crate's find_iter: after an empty match step one character on, and skip
    // the first empty match that follows a non-empty one.
    if (st == en) {
      last_end += en < s.size() ? u8len(static_cast<unsigned char>(s[en])) : 1;
      if (skip_next_empty) {
        skip_next_empty = false;
        continue;
      }
    } else {
      skip_next_empty = true;
    }
    out.emplace_back(st, en);
  }
}

void Regex::spans(std::string_view s, std::vector<Span>& out) const {
  out.clear();
  if (s.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  thread_local std::vector<std::pair<size_t, size_t>> found;
  find_all(s, found);
  size_t prev = 0;
  for (const auto& [st, en] : found) {
    if (prev != st) out.push_back({prev, st, false});
    out.push_back({st, en, true});
    prev = en;
  }
  if (prev != s.size()) out.push_back({prev, s.size(), false});
}

}  // namespace dt::io::hft
