// UTF-8 and the parts of Python's str that work on code points: whitespace as str.isspace
// reads it, strip, and case mapping.
#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "io/hf_tok_internal.h"
#include "io/jinja_value.h"

namespace dt::io::jinja {

// Decodes the code point at s[p] (s is valid UTF-8); returns its byte length.
size_t utf8_decode_at(const std::string& s, size_t p, uint32_t* cp) {
  unsigned char c = static_cast<unsigned char>(s[p]);
  if (c < 0x80) { *cp = c; return 1; }
  size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
  uint32_t v = c & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < n && p + k < s.size(); ++k) v = (v << 6) | (static_cast<unsigned char>(s[p + k]) & 0x3F);
  *cp = v;
  return n;
}

// One encoder for the library: the tokenizer's (io/hf_tok_internal.h).
void utf8_append(uint32_t cp, std::string& out) { hft::u8append(out, cp); }

bool utf8_valid(const std::string& s) {
  size_t p = 0, n = s.size();
  while (p < n) {
    unsigned char c = static_cast<unsigned char>(s[p]);
    if (c < 0x80) { ++p; continue; }
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
    else return false;
    if (p + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      unsigned char d = static_cast<unsigned char>(s[p + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    p += len;
  }
  return true;
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::vector<size_t> utf8_offsets(const std::string& s) {
  std::vector<size_t> o;
  for (size_t p = 0; p < s.size(); ++p)
    if ((static_cast<unsigned char>(s[p]) & 0xC0) != 0x80) o.push_back(p);
  o.push_back(s.size());
  return o;
}

bool py_isspace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::pair<size_t, size_t> py_strip_range(const std::string& s, bool left, bool right, const std::string* chars) {
  std::vector<uint32_t> set;
  if (chars)
    for (size_t p = 0; p < chars->size();) {
      uint32_t c;
      p += utf8_decode_at(*chars, p, &c);
      set.push_back(c);
    }
  auto strip_it = [&](uint32_t c) {
    return chars ? std::find(set.begin(), set.end(), c) != set.end() : py_isspace(c);
  };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e) {
      uint32_t c;
      size_t n = utf8_decode_at(s, b, &c);
      if (!strip_it(c)) break;
      b += n;
    }
  if (right)
    while (e > b) {
      size_t p = e - 1;
      while (p > b && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
      uint32_t c;
      utf8_decode_at(s, p, &c);
      if (!strip_it(c)) break;
      e = p;
    }
  return {b, e};
}

namespace {

// Case mapping: ASCII, Latin-1 and basic Cyrillic, as Python maps them. Other scripts with
// case are refused rather than mapped wrongly; scripts without case pass through.
bool case_unsupported(uint32_t c) {
  static const uint32_t ranges[][2] = {
      {0x100, 0x250},     {0x370, 0x400},     {0x460, 0x590},     {0x10A0, 0x1100},   {0x13A0, 0x1400},
      {0x1C80, 0x1CC0},   {0x1E00, 0x2000},   {0x2100, 0x2190},   {0x24B6, 0x24EA},   {0x2C00, 0x2D30},
      {0xA640, 0xA6A0},   {0xA720, 0xA800},   {0xAB70, 0xABC0},   {0xFB00, 0xFB18},   {0xFF21, 0xFF5B},
      {0x10400, 0x10500}, {0x10C80, 0x10D00}, {0x118A0, 0x11900}, {0x16E40, 0x16EA0}, {0x1E900, 0x1E960}};
  for (const auto& r : ranges)
    if (c >= r[0] && c < r[1]) return true;
  return false;
}

std::string map_case(const std::string& s, bool up) {
  std::string out;
  out.reserve(s.size());
  for (size_t p = 0; p < s.size();) {
    uint32_t c;
    p += utf8_decode_at(s, p, &c);
    if (case_unsupported(c)) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s() of U+%04X is not supported", up ? "upper" : "lower", c);
      type_error(buf);
    }
    if (up) {
      if (c >= 'a' && c <= 'z') c -= 32;
      else if (c == 0xDF) { out += "SS"; continue; }
      else if (c == 0xB5) c = 0x39C;
      else if (c == 0xFF) c = 0x178;
      else if (c >= 0xE0 && c <= 0xFE && c != 0xF7) c -= 32;
      else if (c >= 0x430 && c <= 0x44F) c -= 32;
      else if (c >= 0x450 && c <= 0x45F) c -= 80;
    } else {
      if (c >= 'A' && c <= 'Z') c += 32;
      else if (c >= 0xC0 && c <= 0xDE && c != 0xD7) c += 32;
      else if (c >= 0x410 && c <= 0x42F) c += 32;
      else if (c >= 0x400 && c <= 0x40F) c += 80;
    }
    utf8_append(c, out);
  }
  return out;
}

}  // namespace

std::string py_upper(const std::string& s) { return map_case(s, true); }
std::string py_lower(const std::string& s) { return map_case(s, false); }

}  // namespace dt::io::jinja
