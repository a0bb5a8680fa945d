// UTF-8, Unicode properties (ICU), NFC (ICU) and GPT-2's byte table for io/hf_tokenizer.h.
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <cstring>

#include "core/error.h"
#include "io/hf_tok_internal.h"

namespace dt::io::hft {

uint32_t u8decode(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  if (u[0] < 0x80) return u[0];
  if (u[0] < 0xE0) return (uint32_t(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
  if (u[0] < 0xF0) return (uint32_t(u[0] & 0x0F) << 12) | (uint32_t(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
  return (uint32_t(u[0] & 0x07) << 18) | (uint32_t(u[1] & 0x3F) << 12) | (uint32_t(u[2] & 0x3F) << 6) |
         (u[3] & 0x3F);
}

void u8append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {

const char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// For the lead byte `c`: how many continuation bytes follow and the range of the first one
// (Unicode's table 3-7, well-formed UTF-8). need = -1: never a lead byte.
void lead_info(unsigned char c, int& need, unsigned char& lo, unsigned char& hi) {
  lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    need = -1;
  }
}

// Decodes s[i..]: returns the end of the maximal well-formed prefix starting at i; `complete`
// tells whether it is a whole character. i < s.size().
size_t scan_char(std::string_view s, size_t i, bool& complete) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    complete = true;
    return i + 1;
  }
  int need;
  unsigned char lo, hi;
  lead_info(c, need, lo, hi);
  if (need < 0) {
    complete = false;
    return i + 1;
  }
  size_t j = i + 1;
  for (int k = 0; k < need; ++k, ++j) {
    if (j >= s.size()) {
      complete = false;
      return j;
    }
    const auto b = static_cast<unsigned char>(s[j]);
    if (b < (k == 0 ? lo : 0x80) || b > (k == 0 ? hi : 0xBF)) {
      complete = false;
      return j;
    }
  }
  complete = true;
  return j;
}

}  // namespace

bool utf8_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    bool ok;
    i = scan_char(s, i, ok);
    if (!ok) return false;
  }
  return true;
}

std::string utf8_replace_invalid(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  while (i < s.size()) {
    bool ok;
    const size_t j = scan_char(s, i, ok);
    if (ok)
      out.append(s.data() + i, j - i);
    else
      out += kReplacement;
    i = j;
  }
  return out;
}

std::string Utf8Lossy::push(std::string_view bytes) {
  pending_.append(bytes.data(), bytes.size());
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    bool ok;
    const size_t j = scan_char(pending_, i, ok);
    if (ok) {
      out.append(pending_, i, j - i);
    } else if (j >= pending_.size() && static_cast<unsigned char>(pending_[i]) >= 0xC2 &&
               static_cast<unsigned char>(pending_[i]) <= 0xF4) {
      break;  // a character still coming
    } else {
      out += kReplacement;
    }
    i = j;
  }
  pending_.erase(0, i);
  return out;
}

std::string Utf8Lossy::finish() {
  std::string out = pending_.empty() ? std::string() : std::string(kReplacement);
  pending_.clear();
  return out;
}

bool is_white_space(uint32_t cp) { return u_isUWhiteSpace(static_cast<UChar32>(cp)); }

bool is_word_char(uint32_t cp) {
  const auto c = static_cast<UChar32>(cp);
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  const int32_t mask = U_MASK(u_charType(c));
  return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || (mask & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) ||
         u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL);
}

bool is_numeric(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return (U_MASK(u_charType(static_cast<UChar32>(cp))) & (U_GC_ND_MASK | U_GC_NL_MASK | U_GC_NO_MASK)) != 0;
}

std::string nfc(std::string_view s) {
  // No character below U+0300 (lead bytes below 0xCC) changes under NFC or combines with
  // what precedes it: text made of those alone is already NFC.
  bool simple = true;
  for (char ch : s)
    if (static_cast<unsigned char>(ch) >= 0xCC) {
      simple = false;
      break;
    }
  if (simple) return std::string(s);
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* n2 = unorm2_getNFCInstance(&err);
  if (U_FAILURE(err)) fail(DT_ERR_INTERNAL, std::string("ICU: no NFC normalizer: ") + u_errorName(err));
  int32_t n16 = 0;
  err = U_ZERO_ERROR;
  u_strFromUTF8(nullptr, 0, &n16, s.data(), static_cast<int32_t>(s.size()), &err);
  std::vector<UChar> src(static_cast<size_t>(n16) + 1);
  err = U_ZERO_ERROR;
  u_strFromUTF8(src.data(), n16 + 1, &n16, s.data(), static_cast<int32_t>(s.size()), &err);
  if (U_FAILURE(err)) fail(DT_ERR_INTERNAL, std::string("ICU: UTF-8 to UTF-16: ") + u_errorName(err));
  // NFC never grows text by more than 3x (Unicode's stability bound); retry once if it did.
  std::vector<UChar> dst(static_cast<size_t>(n16) * 3 + 16);
  err = U_ZERO_ERROR;
  int32_t nd = unorm2_normalize(n2, src.data(), n16, dst.data(), static_cast<int32_t>(dst.size()), &err);
  if (err == U_BUFFER_OVERFLOW_ERROR) {
    dst.resize(static_cast<size_t>(nd) + 1);
    err = U_ZERO_ERROR;
    nd = unorm2_normalize(n2, src.data(), n16, dst.data(), static_cast<int32_t>(dst.size()), &err);
  }
  if (U_FAILURE(err)) fail(DT_ERR_INTERNAL, std::string("ICU: NFC: ") + u_errorName(err));
  int32_t n8 = 0;
  err = U_ZERO_ERROR;
  u_strToUTF8(nullptr, 0, &n8, dst.data(), nd, &err);
  std::string out(static_cast<size_t>(n8) + 1, '\0');
  err = U_ZERO_ERROR;
  u_strToUTF8(out.data(), n8 + 1, &n8, dst.data(), nd, &err);
  if (U_FAILURE(err)) fail(DT_ERR_INTERNAL, std::string("ICU: UTF-16 to UTF-8: ") + u_errorName(err));
  out.resize(static_cast<size_t>(n8));
  return out;
}

namespace {

struct ByteTable {
  std::string to_char[256];
  int16_t from_cp[512];  // characters of the table are below U+0200
  ByteTable() {
    std::fill(std::begin(from_cp), std::end(from_cp), int16_t(-1));
    uint32_t n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = printable ? uint32_t(b) : 256 + n++;
      u8append(to_char[b], cp);
      from_cp[cp] = static_cast<int16_t>(b);
    }
  }
};
const ByteTable& byte_table() {
  static const ByteTable t;
  return t;
}

}  // namespace

const std::string& byte_char(uint8_t b) { return byte_table().to_char[b]; }
int char_byte(uint32_t cp) { return cp < 512 ? byte_table().from_cp[cp] : -1; }

__extension__ typedef unsigned __int128 u128;

uint64_t hash_bytes(std::string_view s) {
  // 8 bytes at a time, multiply and fold (wyhash-like mixing; not for adversaries: the maps
  // that hold hostile keys bound their size instead).
  const uint64_t m = 0x9E3779B97F4A7C15ull;
  uint64_t h = 0x243F6A8885A308D3ull ^ (s.size() * m);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    const u128 p = static_cast<u128>(h ^ w) * (w ^ m ^ 0xA0761D6478BD642Full);
    h = static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
  }
  uint64_t w = 0;
  std::memcpy(&w, s.data() + i, s.size() - i);
  const u128 p = static_cast<u128>(h ^ w ^ 0xE7037ED1A0B428DBull) * (m ^ (s.size() - i));
  h = static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
  return h;
}

}  // namespace dt::io::hft
