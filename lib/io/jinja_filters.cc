// The Jinja built-ins chat templates use, part two: filters and tests, each as jinja2
// (or transformers, for tojson) defines it.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include "io/jinja_eval.h"

namespace dt::io::jinja {

namespace {

const char* const kFilters[] = {"abs",  "capitalize", "count", "d",      "default", "first", "float", "int",
                                "items", "join",      "last",  "length", "list",    "lower", "replace", "safe",
                                "string", "title",    "tojson", "trim",  "upper"};
const char* const kTests[] = {"boolean", "callable", "defined", "divisibleby", "eq", "equalto", "even",  "false",
                              "float",   "ge",       "gt",      "in",          "integer", "iterable", "le", "lower",
                              "lt",      "mapping",  "ne",      "none",        "number",  "odd",   "sameas",
                              "sequence", "string",  "true",    "undefined",   "upper"};

template <size_t N>
std::string joined(const char* const (&names)[N]) {
  std::string out;
  for (const char* x : names) out += std::string(out.empty() ? "" : ", ") + x;
  return out;
}

}  // namespace

bool known_filter(const std::string& name) { return listed(kFilters, name); }
bool known_test(const std::string& name) { return listed(kTests, name); }
std::string known_filters() { return joined(kFilters); }
std::string known_tests() { return joined(kTests); }

bool apply_test(const std::string& n, const Value& v, const Args& a) {
  const Value* other = arg(a, 0, "value");
  auto need_other = [&]() -> const Value& {
    if (!other) type_error("the test '" + n + "' takes an argument");
    return *other;
  };
  static const char* const with_argument[] = {"divisibleby", "eq", "equalto", "ne", "lt", "gt", "le", "ge", "in", "sameas"};
  const size_t given = a.pos.size() + a.kw.size();
  if (given > (listed(with_argument, n) ? 1u : 0u))
    type_error("the test '" + n + "' takes " + (listed(with_argument, n) ? "one argument" : "no argument"));
  if (n == "defined") return !v.is_undefined();
  if (n == "undefined") return v.is_undefined();
  if (n == "none") return v.kind == Kind::None;
  if (n == "string") return v.kind == Kind::String;
  if (n == "mapping") return v.kind == Kind::Dict;
  if (n == "iterable") return v.kind == Kind::String || v.kind == Kind::List || v.kind == Kind::Dict || v.is_undefined();
  if (n == "sequence") return v.kind == Kind::String || v.kind == Kind::List || v.kind == Kind::Dict || v.is_undefined();
  if (n == "number") return v.is_number();
  if (n == "integer") return v.kind == Kind::Int;
  if (n == "float") return v.kind == Kind::Float;
  if (n == "boolean") return v.kind == Kind::Bool;
  if (n == "true") return v.kind == Kind::Bool && v.b;
  if (n == "false") return v.kind == Kind::Bool && !v.b;
  if (n == "callable") return v.kind == Kind::Function || v.kind == Kind::Method;
  if (n == "lower" || n == "upper") {
    if (v.kind != Kind::String) return false;
    std::string other_case = n == "lower" ? py_lower(v.s) : py_upper(v.s);
    std::string flipped = n == "lower" ? py_upper(v.s) : py_lower(v.s);
    return other_case == v.s && flipped != v.s;  // cased, and already in that case
  }
  if (n == "odd" || n == "even") {
    int64_t x = need_int(v, "the value tested");
    return ((x % 2) != 0) == (n == "odd");
  }
  if (n == "divisibleby") {
    int64_t d = need_int(need_other(), "divisibleby's argument");
    if (d == 0) type_error("integer division or modulo by zero");
    return need_int(v, "the value tested") % d == 0;
  }
  if (n == "eq" || n == "equalto") return equal(v, need_other());
  if (n == "ne") return !equal(v, need_other());
  if (n == "lt" || n == "gt" || n == "le" || n == "ge") {
    const Value& o = need_other();
    throw_if_undefined(v);
    throw_if_undefined(o);
    if (n == "lt") return less(v, o);
    if (n == "gt") return less(o, v);
    if (n == "le") return less(v, o) || equal(v, o);
    return less(o, v) || equal(v, o);
  }
  if (n == "sameas") {
    const Value& o = need_other();
    if (v.kind != o.kind) return false;
    switch (v.kind) {
      case Kind::None: return true;
      case Kind::Bool: return v.b == o.b;
      case Kind::List: return v.list == o.list;
      case Kind::Dict: return v.dict == o.dict;
      case Kind::Namespace: return v.ns == o.ns;
      default: return equal(v, o);
    }
  }
  if (n == "in") {
    const Value& seq = need_other();
    switch (seq.kind) {
      case Kind::Undefined: return false;
      case Kind::String:
        if (v.kind != Kind::String)
          type_error(std::string("'in <string>' requires string as left operand, not ") + type_name(v));
        return seq.s.find(v.s) != std::string::npos;
      case Kind::List:
        for (const Value& x : seq.list->items)
          if (equal(x, v)) return true;
        return false;
      case Kind::Dict:
        if (!hashable(v)) type_error(std::string("unhashable type: '") + type_name(v) + "'");
        return seq.dict->find(v) != nullptr;
      default: type_error(std::string("argument of type '") + type_name(seq) + "' is not iterable");
    }
  }
  type_error("unknown test '" + n + "'");
}

Value apply_filter(const std::string& n, const Value& v, const Args& a, Budget& budget) {
  const std::string what = "the filter '" + n + "'";
  if (n == "default" || n == "d") {
    check_arity(a, 2, {"default_value", "boolean"}, what);
    const Value* dv = arg(a, 0, "default_value");
    const Value* boolean = arg(a, 1, "boolean");
    if (v.is_undefined() || (boolean && truthy(*boolean) && !truthy(v))) return dv ? *dv : Value::string("");
    return v;
  }
  if (n == "length" || n == "count") {
    check_arity(a, 0, {}, what);
    switch (v.kind) {
      case Kind::Undefined: return Value::integer(0);
      case Kind::String: return Value::integer(static_cast<int64_t>(utf8_length(v.s)));
      case Kind::List: return Value::integer(static_cast<int64_t>(v.list->items.size()));
      case Kind::Dict: return Value::integer(static_cast<int64_t>(v.dict->items.size()));
      default: type_error(std::string("object of type '") + type_name(v) + "' has no len()");
    }
  }
  if (n == "trim") {
    check_arity(a, 1, {"chars"}, what);
    Value s = v.kind == Kind::String ? v : Value::string(py_str(v));
    return strip(s, true, true, arg(a, 0, "chars"));
  }
  if (n == "string" || n == "safe") {
    check_arity(a, 0, {}, what);
    return v.kind == Kind::String ? v : Value::string(py_str(v));
  }
  if (n == "upper" || n == "lower" || n == "capitalize" || n == "title") {
    check_arity(a, 0, {}, what);
    std::string s = py_str(v);
    if (n == "upper") return Value::string(py_upper(s));
    if (n == "lower") return Value::string(py_lower(s));
    if (n == "title") return Value::string(title_filter(s));
    std::vector<size_t> cps = utf8_offsets(s);
    if (cps.size() < 2) return Value::string(s);
    return Value::string(py_upper(s.substr(0, cps[1])) + py_lower(s.substr(cps[1])));
  }
  if (n == "tojson") {
    check_arity(a, 1, {"indent", "separators", "sort_keys", "ensure_ascii"}, what);
    const Value* indent = arg(a, 0, "indent");
    const Value* seps = arg(a, 1, "separators");
    const Value* sort = arg(a, 2, "sort_keys");
    const Value* ascii = arg(a, 3, "ensure_ascii");
    if (ascii && truthy(*ascii)) type_error("tojson(ensure_ascii=true) is not supported");
    int ind = -1;
    if (indent && indent->kind != Kind::None) {
      int64_t i = need_int(*indent, "tojson's indent");
      ind = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(i, 64)));
    }
    std::string isep = ind >= 0 ? "," : ", ", ksep = ": ";
    if (seps && seps->kind != Kind::None) {
      if (seps->kind != Kind::List || seps->list->items.size() != 2)
        type_error("tojson's separators must be a pair of strings");
      isep = need_string(seps->list->items[0], "a separator");
      ksep = need_string(seps->list->items[1], "a separator");
    }
    std::string out = to_json(v, ind, isep, ksep, sort && truthy(*sort));
    budget.check_string(out.size());
    budget.step(out.size() / 64);
    return Value::string(std::move(out));
  }
  if (n == "join") {
    check_arity(a, 2, {"d", "attribute"}, what);
    const Value* d = arg(a, 0, "d");
    const Value* attr = arg(a, 1, "attribute");
    std::string sep = d ? py_str(*d) : "";
    std::string out;
    std::shared_ptr<const Regions> regions;
    std::vector<Value> items = iterate(v, budget);
    for (size_t k = 0; k < items.size(); ++k) {
      Value item = attr ? get_item(items[k], *attr, budget) : items[k];
      if (k) out += sep;
      if (item.kind == Kind::String) append_with_regions(out, regions, item.s, item.regions);
      else out += py_str(item);
      budget.check_string(out.size());
    }
    return Value::string(std::move(out), regions);
  }
  if (n == "first" || n == "last") {
    check_arity(a, 0, {}, what);
    std::vector<Value> items = iterate(v, budget);
    if (items.empty()) return Value::undefined("No " + n + " item, sequence was empty.");
    return n == "first" ? items.front() : items.back();
  }
  if (n == "list") {
    check_arity(a, 0, {}, what);
    return Value::make_list(iterate(v, budget));
  }
  if (n == "items") {
    check_arity(a, 0, {}, what);
    if (v.is_undefined()) return Value::make_list({});
    if (v.kind != Kind::Dict) type_error("Can only get item pairs from a mapping.");
    Value m = Value::method(v, "items");
    return call_method(m, Args{}, budget);
  }
  if (n == "replace") {
    check_arity(a, 3, {"old", "new", "count"}, what);
    const Value* o = arg(a, 0, "old");
    const Value* r = arg(a, 1, "new");
    if (!o || !r) type_error("replace takes at least two arguments");
    const Value* c = arg(a, 2, "count");
    Value s = v.kind == Kind::String ? v : Value::string(py_str(v));
    return replace(s, py_str(*o), py_str(*r), c && c->kind != Kind::None ? need_int(*c, "count") : -1, budget);
  }
  if (n == "int" || n == "float") {
    check_arity(a, 1, {"default"}, what);
    const Value* dflt = arg(a, 0, "default");
    Value fallback = dflt ? *dflt : (n == "int" ? Value::integer(0) : Value::real(0));
    double x;
    if (v.is_number()) {
      x = v.as_double();
      if (n == "int" && v.is_integer()) return Value::integer(v.as_int());
    } else if (v.kind == Kind::String) {
      auto r = py_strip_range(v.s, true, true, nullptr);
      std::string t = v.s.substr(r.first, r.second - r.first);
      char* end = nullptr;
      if (t.empty()) return fallback;
      errno = 0;
      if (n == "int") {
        long long i = std::strtoll(t.c_str(), &end, 10);
        if (*end == '\0' && errno == 0) return Value::integer(i);
      }
      x = std::strtod(t.c_str(), &end);
      if (*end != '\0') return fallback;
    } else {
      return fallback;
    }
    if (n == "float") return Value::real(x);
    if (!(x > -9.2e18 && x < 9.2e18)) return fallback;
    return Value::integer(static_cast<int64_t>(x));
  }
  if (n == "abs") {
    check_arity(a, 0, {}, what);
    throw_if_undefined(v);
    if (v.kind == Kind::Float) return Value::real(v.f < 0 ? -v.f : v.f);
    if (!v.is_integer()) type_error(std::string("bad operand type for abs(): '") + type_name(v) + "'");
    if (v.as_int() == INT64_MIN) type_error("integer overflow (templates compute with 64-bit integers)");
    return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  type_error("unknown filter '" + n + "'");
}


}  // namespace dt::io::jinja
