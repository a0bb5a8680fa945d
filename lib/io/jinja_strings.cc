// Helpers of the Jinja built-ins: argument checks, and Python's str methods that the
// methods and filters share (strip, split, replace, jinja2's title).
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include "io/jinja_eval.h"

namespace dt::io::jinja {

void throw_if_undefined(const Value& v) {
  if (v.is_undefined()) type_error(v.s);
}

// The argument at `pos` or named `kw`; nullptr when neither was given.
const Value* arg(const Args& a, size_t pos, const char* kw) {
  if (pos < a.pos.size()) return &a.pos[pos];
  for (const auto& kv : a.kw)
    if (kv.first == kw) return &kv.second;
  return nullptr;
}

void check_arity(const Args& a, size_t max_pos, std::initializer_list<const char*> kws, const std::string& what) {
  if (a.pos.size() > max_pos) type_error(what + " takes at most " + std::to_string(max_pos) + " positional arguments");
  for (const auto& kv : a.kw) {
    bool ok = false;
    size_t idx = 0;
    for (const char* k : kws) {
      if (kv.first == k) ok = idx >= a.pos.size();
      ++idx;
    }
    if (!ok) type_error(what + " got an unexpected keyword argument '" + kv.first + "'");
  }
}

const std::string& need_string(const Value& v, const std::string& what) {
  throw_if_undefined(v);
  if (v.kind != Kind::String) type_error(what + " must be a string, not " + type_name(v));
  return v.s;
}

int64_t need_int(const Value& v, const std::string& what) {
  throw_if_undefined(v);
  if (!v.is_integer()) type_error(what + " must be an integer, not " + type_name(v));
  return v.as_int();
}

Value substring(const Value& s, size_t b, size_t e) {
  return Value::string(s.s.substr(b, e - b), clip_regions(s.regions, b, e));
}

Value strip(const Value& s, bool left, bool right, const Value* chars) {
  const std::string* set = nullptr;
  if (chars && chars->kind != Kind::None) set = &need_string(*chars, "strip()'s argument");
  auto r = py_strip_range(s.s, left, right, set);
  return substring(s, r.first, r.second);
}

std::vector<Value> split(const std::string& s, const Value* sep, int64_t maxsplit) {
  std::vector<Value> out;
  if (sep && sep->kind != Kind::None) {
    const std::string& d = need_string(*sep, "split()'s separator");
    if (d.empty()) type_error("empty separator");
    size_t p = 0;
    for (int64_t n = 0; maxsplit < 0 || n < maxsplit; ++n) {
      size_t q = s.find(d, p);
      if (q == std::string::npos) break;
      out.push_back(Value::string(s.substr(p, q - p)));
      p = q + d.size();
    }
    out.push_back(Value::string(s.substr(p)));
    return out;
  }
  // Runs of whitespace separate; none at the ends.
  std::vector<size_t> cps = utf8_offsets(s);
  auto space_at = [&](size_t k) {
    uint32_t c = static_cast<unsigned char>(s[cps[k]]);
    if (c >= 0x80) {
      std::string one = s.substr(cps[k], cps[k + 1] - cps[k]);
      auto r = py_strip_range(one, true, false, nullptr);
      return r.first == one.size();
    }
    return py_isspace(c);
  };
  size_t n = cps.size() - 1, k = 0;
  int64_t splits = 0;
  while (k < n) {
    while (k < n && space_at(k)) ++k;
    if (k == n) break;
    if (maxsplit >= 0 && splits == maxsplit) {
      auto r = py_strip_range(s.substr(cps[k]), false, true, nullptr);
      out.push_back(Value::string(s.substr(cps[k], r.second)));
      break;
    }
    size_t b = k;
    while (k < n && !space_at(k)) ++k;
    out.push_back(Value::string(s.substr(cps[b], cps[k] - cps[b])));
    ++splits;
  }
  return out;
}

Value replace(const Value& s, const std::string& old, const std::string& repl, int64_t count, Budget& budget) {
  std::string out;
  int64_t done = 0;
  if (old.empty()) {
    std::vector<size_t> cps = utf8_offsets(s.s);
    for (size_t k = 0; k < cps.size(); ++k) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (k + 1 < cps.size()) out.append(s.s, cps[k], cps[k + 1] - cps[k]);
      budget.check_string(out.size());
    }
    return Value::string(std::move(out));
  }
  size_t p = 0;
  while (count < 0 || done < count) {
    size_t q = s.s.find(old, p);
    if (q == std::string::npos) break;
    out.append(s.s, p, q - p);
    out += repl;
    p = q + old.size();
    ++done;
    budget.check_string(out.size());
  }
  out.append(s.s, p, std::string::npos);
  budget.check_string(out.size());
  budget.step(out.size() / 4096);
  return Value::string(std::move(out));
}

// jinja2's title filter: each word, after a run of [-\s({[<], gets an upper-case first letter.
std::string title_filter(const std::string& s) {
  std::string out;
  std::vector<size_t> cps = utf8_offsets(s);
  bool word_start = true;
  for (size_t k = 0; k + 1 < cps.size(); ++k) {
    std::string ch = s.substr(cps[k], cps[k + 1] - cps[k]);
    bool sep = ch.size() == 1 && std::strchr("-({[<", ch[0]) != nullptr;
    if (!sep) sep = py_strip_range(ch, true, false, nullptr).first == ch.size();
    if (sep) {
      out += ch;
      word_start = true;
    } else {
      out += word_start ? py_upper(ch) : py_lower(ch);
      word_start = false;
    }
  }
  return out;
}

}  // namespace dt::io::jinja
