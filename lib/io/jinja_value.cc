#include "io/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace dt::io::jinja {

void type_error(const std::string& m) { throw std::runtime_error(m); }

Value Value::string(std::string x, std::shared_ptr<const Regions> r) {
  Value v;
  v.kind = Kind::String;
  v.s = std::move(x);
  if (r && !r->empty()) v.regions = std::move(r);
  return v;
}

Value Value::make_list(std::vector<Value> items, bool tuple) {
  auto d = std::make_shared<ListData>();
  int depth = 0;
  bool has_ns = false;
  for (const Value& x : items) {
    depth = std::max(depth, x.depth());
    has_ns = has_ns || x.holds_namespace();
  }
  if (depth + 1 > kMaxValueDepth)
    type_error("values nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  d->items = std::move(items);
  d->tuple = tuple;
  d->depth = depth + 1;
  d->has_ns = has_ns;
  Value v;
  v.kind = Kind::List;
  v.list = std::move(d);
  return v;
}

Value Value::make_dict(std::vector<std::pair<Value, Value>> items) {
  auto d = std::make_shared<DictData>();
  int depth = 0;
  bool has_ns = false;
  for (const auto& kv : items) {
    depth = std::max({depth, kv.first.depth(), kv.second.depth()});
    has_ns = has_ns || kv.first.holds_namespace() || kv.second.holds_namespace();
  }
  if (depth + 1 > kMaxValueDepth)
    type_error("values nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  d->items = std::move(items);
  d->depth = depth + 1;
  d->has_ns = has_ns;
  Value v;
  v.kind = Kind::Dict;
  v.dict = std::move(d);
  return v;
}

Value Value::method(const Value& obj, std::string name) {
  Value v;
  v.kind = Kind::Method;
  v.s = std::move(name);
  v.self = std::make_shared<const Value>(obj);
  return v;
}

int Value::depth() const {
  if (kind == Kind::List || kind == Kind::Loop) return list->depth;
  if (kind == Kind::Dict) return dict->depth;
  if (kind == Kind::Method) return self->depth();
  return 0;
}

bool Value::holds_namespace() const {
  if (kind == Kind::Namespace) return true;
  if (kind == Kind::List || kind == Kind::Loop) return list->has_ns;
  if (kind == Kind::Dict) return dict->has_ns;
  if (kind == Kind::Method) return self->holds_namespace();
  return false;
}

const Value* DictData::find(const Value& key) const {
  for (const auto& kv : items)
    if (equal(kv.first, key)) return &kv.second;
  return nullptr;
}

Value* NamespaceData::find(const std::string& name) {
  for (auto& kv : attrs)
    if (kv.first == name) return &kv.second;
  return nullptr;
}

const char* type_name(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return v.list->tuple ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Function: return "function";
    case Kind::Method: return "builtin_function_or_method";
    case Kind::Loop: return "LoopContext";
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return v.b;
    case Kind::Int: return v.i != 0;
    case Kind::Float: return v.f != 0;
    case Kind::String: return !v.s.empty();
    case Kind::List: return !v.list->items.empty();
    case Kind::Dict: return !v.dict->items.empty();
    default: return true;
  }
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integer() && b.is_integer()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return a.s == b.s;
    case Kind::List: {
      if (a.list->tuple != b.list->tuple || a.list->items.size() != b.list->items.size()) return false;
      for (size_t k = 0; k < a.list->items.size(); ++k)
        if (!equal(a.list->items[k], b.list->items[k])) return false;
      return true;
    }
    case Kind::Dict: {
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& kv : a.dict->items) {
        const Value* other = b.dict->find(kv.first);
        if (!other || !equal(kv.second, *other)) return false;
      }
      return true;
    }
    case Kind::Namespace: return a.ns == b.ns;
    case Kind::Function: return a.s == b.s;
    case Kind::Loop: return a.list == b.list && a.i == b.i;
    default: return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integer() && b.is_integer()) return a.as_int() < b.as_int();
    return a.as_double() < b.as_double();
  }
  if (a.kind == Kind::String && b.kind == Kind::String) return a.s < b.s;
  if (a.kind == Kind::List && b.kind == Kind::List && a.list->tuple == b.list->tuple) {
    const auto& x = a.list->items;
    const auto& y = b.list->items;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k)
      if (!equal(x[k], y[k])) return less(x[k], y[k]);
    return x.size() < y.size();
  }
  type_error(std::string("'<' not supported between instances of '") + type_name(a) + "' and '" + type_name(b) + "'");
}

bool hashable(const Value& v) {
  if (v.kind == Kind::Dict || v.kind == Kind::Undefined) return false;
  if (v.kind == Kind::List) {
    if (!v.list->tuple) return false;
    for (const Value& x : v.list->items)
      if (!hashable(x)) return false;
  }
  return true;
}

// ---------------------------------------------------------------- str, repr, json

namespace {

// Python's str.isprintable(), for the code points that matter in practice: controls,
// separators other than ' ', format characters, private use and non-characters.
bool py_printable(uint32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
      (c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB))
    return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x180E) return false;
  if ((c >= 0xE000 && c <= 0xF8FF) || c >= 0xF0000 || (c & 0xFFFE) == 0xFFFE) return false;
  if (c == 0xE0001 || (c >= 0xE0020 && c <= 0xE007F)) return false;
  return true;
}

std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  char buf[16];
  for (size_t p = 0; p < s.size();) {
    uint32_t c;
    size_t n = utf8_decode_at(s, p, &c);
    if (c == static_cast<uint32_t>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (!py_printable(c)) {
      if (c < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", c);
      else if (c < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", c);
      else std::snprintf(buf, sizeof buf, "\\U%08x", c);
      out += buf;
    } else {
      out.append(s, p, n);
    }
    p += n;
  }
  out += q;
  return out;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  char buf[8];
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

}  // namespace

// ---------------------------------------------------------------- regions

std::shared_ptr<const Regions> clip_regions(const std::shared_ptr<const Regions>& r, size_t begin, size_t end) {
  if (!r) return nullptr;
  auto out = std::make_shared<Regions>();
  for (const Region& g : *r) {
    bool overlaps = std::max(g.begin, begin) < std::min(g.end, end);
    bool anchor = (g.begin == g.end && g.begin >= begin && g.end <= end) ||  // an empty content
                  (begin == end && g.begin <= begin && end <= g.end);       // all of it stripped
    if (!overlaps && !anchor) continue;
    out->push_back({std::max(g.begin, begin) - begin, std::min(g.end, end) - begin, g.tag});
  }
  if (out->empty()) return nullptr;
  return out;
}

void append_with_regions(std::string& a, std::shared_ptr<const Regions>& ra, const std::string& b,
                         const std::shared_ptr<const Regions>& rb) {
  if (rb) {
    auto merged = std::make_shared<Regions>(ra ? *ra : Regions{});
    for (const Region& g : *rb) merged->push_back({g.begin + a.size(), g.end + a.size(), g.tag});
    ra = std::move(merged);
  }
  a += b;
}

// ---------------------------------------------------------------- str, repr, json

std::string py_float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  // The shortest digits that read back as x (Python's repr).
  char buf[40];
  int prec = 1;
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  std::string e(buf);
  bool neg = e[0] == '-';
  if (neg) e.erase(0, 1);
  size_t epos = e.find('e');
  int exp10 = std::atoi(e.c_str() + epos + 1);
  std::string digits;
  for (size_t k = 0; k < epos; ++k)
    if (e[k] != '.') digits += e[k];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp10 >= -4 && exp10 < 16) {  // repr's fixed notation
    if (exp10 < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp10 + 1) {
      out = digits + std::string(static_cast<size_t>(exp10 + 1 - static_cast<int>(digits.size())), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp10 + 1)) + "." + digits.substr(static_cast<size_t>(exp10 + 1));
    }
    return (neg ? "-" : "") + out;
  }
  out = digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  std::snprintf(buf, sizeof buf, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
  return (neg ? "-" : "") + out + buf;
}

std::string py_repr(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "Undefined";
    case Kind::String: return repr_string(v.s);
    case Kind::List: {
      const auto& items = v.list->items;
      std::string out = v.list->tuple ? "(" : "[";
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += ", ";
        out += py_repr(items[k]);
      }
      if (v.list->tuple && items.size() == 1) out += ",";
      return out + (v.list->tuple ? ")" : "]");
    }
    case Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& kv : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        out += py_repr(kv.first) + ": " + py_repr(kv.second);
      }
      return out + "}";
    }
    case Kind::Namespace: {
      std::string out = "<Namespace {";
      bool first = true;
      for (const auto& kv : v.ns->attrs) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(kv.first) + ": " + py_repr(kv.second);
      }
      return out + "}>";
    }
    default: return py_str(v);
  }
}

std::string py_str(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return v.b ? "True" : "False";
    case Kind::Int: return std::to_string(v.i);
    case Kind::Float: return py_float_repr(v.f);
    case Kind::String: return v.s;
    case Kind::Function:
    case Kind::Method: type_error("printing the function '" + v.s + "' is not supported");
    case Kind::Loop: return "<LoopContext " + std::to_string(v.i + 1) + "/" + std::to_string(v.list->items.size()) + ">";
    default: return py_repr(v);
  }
}

namespace {

void json_into(const Value& v, int indent, const std::string& isep, const std::string& ksep, bool sort_keys,
               int level, std::string& out) {
  auto newline = [&](int lv) {
    if (indent >= 0) out += "\n" + std::string(static_cast<size_t>(indent) * static_cast<size_t>(lv), ' ');
  };
  switch (v.kind) {
    case Kind::None: out += "null"; return;
    case Kind::Bool: out += v.b ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.i); return;
    case Kind::Float:
      if (std::isnan(v.f)) out += "NaN";
      else if (std::isinf(v.f)) out += v.f < 0 ? "-Infinity" : "Infinity";
      else out += py_float_repr(v.f);
      return;
    case Kind::String: out += json_string(v.s); return;
    case Kind::List: {
      const auto& items = v.list->items;
      if (items.empty()) { out += "[]"; return; }
      out += "[";
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += isep;
        newline(level + 1);
        json_into(items[k], indent, isep, ksep, sort_keys, level + 1, out);
      }
      newline(level);
      out += "]";
      return;
    }
    case Kind::Dict: {
      if (v.dict->items.empty()) { out += "{}"; return; }
      std::vector<std::pair<std::string, const Value*>> items;
      for (const auto& kv : v.dict->items) {
        const Value& key = kv.first;
        std::string k;
        if (key.kind == Kind::String) k = key.s;
        else if (key.kind == Kind::Int || key.kind == Kind::Float) k = py_str(key);
        else if (key.kind == Kind::Bool) k = key.b ? "true" : "false";
        else if (key.kind == Kind::None) k = "null";
        else type_error(std::string("keys must be str, int, float, bool or None, not ") + type_name(key));
        if (sort_keys && key.kind != Kind::String) type_error("tojson(sort_keys=true) needs string keys");
        items.push_back({k, &kv.second});
      }
      if (sort_keys)
        std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      out += "{";
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += isep;
        newline(level + 1);
        out += json_string(items[k].first) + ksep;
        json_into(*items[k].second, indent, isep, ksep, sort_keys, level + 1, out);
      }
      newline(level);
      out += "}";
      return;
    }
    default: type_error(std::string("Object of type ") + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

std::string to_json(const Value& v, int indent, const std::string& item_sep, const std::string& key_sep,
                    bool sort_keys) {
  std::string out;
  json_into(v, indent, item_sep, key_sep, sort_keys, 0, out);
  return out;
}

}  // namespace dt::io::jinja
