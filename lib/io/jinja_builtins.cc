// The Jinja built-ins chat templates use, part one: attribute and item access as jinja2's
// sandbox resolves them, slicing, iteration, the methods of str and dict, and the globals
// transformers defines. Each follows the Python function it stands for.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include "io/jinja_eval.h"

namespace dt::io::jinja {

namespace {

const char* const kStrMethods[] = {"strip", "lstrip", "rstrip", "startswith", "endswith", "split",
                                   "upper", "lower",  "replace", "find",      "join"};
// Python's other str methods: refused by name rather than read as a missing attribute.
const char* const kOtherStrMethods[] = {
    "capitalize", "casefold", "center",     "count",      "encode",       "expandtabs", "format",  "format_map",
    "index",      "isalnum",  "isalpha",    "isascii",    "isdecimal",    "isdigit",    "isidentifier",
    "islower",    "isnumeric", "isprintable", "isspace",  "istitle",      "isupper",    "ljust",   "maketrans",
    "partition",  "removeprefix", "removesuffix", "rfind", "rindex",      "rjust",      "rpartition", "rsplit",
    "splitlines", "swapcase", "title",      "translate",  "zfill"};
const char* const kDictMethods[] = {"items", "keys", "values", "get"};
const char* const kOtherDictMethods[] = {"clear", "copy", "fromkeys", "pop", "popitem", "setdefault", "update"};
const char* const kListMethods[] = {"append", "clear", "copy", "count",   "extend", "index",
                                    "insert", "pop",   "remove", "reverse", "sort"};



}  // namespace

std::vector<Value> iterate(const Value& v, Budget& budget) {
  switch (v.kind) {
    case Kind::Undefined: return {};
    case Kind::List: budget.step(v.list->items.size()); return v.list->items;
    case Kind::Dict: {
      budget.step(v.dict->items.size());
      std::vector<Value> keys;
      for (const auto& kv : v.dict->items) keys.push_back(kv.first);
      return keys;
    }
    case Kind::String: {
      std::vector<size_t> cps = utf8_offsets(v.s);
      budget.step(cps.size());
      std::vector<Value> chars;
      for (size_t k = 0; k + 1 < cps.size(); ++k) chars.push_back(substring(v, cps[k], cps[k + 1]));
      return chars;
    }
    default: type_error(std::string("'") + type_name(v) + "' object is not iterable");
  }
}

Value get_attr(const Value& obj, const std::string& name) {
  throw_if_undefined(obj);
  if (!name.empty() && name[0] == '_' && obj.kind != Kind::Dict)
    type_error("access to the attribute '" + name + "' is not allowed");
  auto missing = [&]() { return Value::undefined(std::string("'") + type_name(obj) + " object' has no attribute '" + name + "'"); };
  switch (obj.kind) {
    case Kind::String:
      if (listed(kStrMethods, name)) return Value::method(obj, name);
      if (listed(kOtherStrMethods, name)) type_error("the string method '" + name + "' is not supported in chat templates");
      return missing();
    case Kind::Dict: {
      if (listed(kDictMethods, name)) return Value::method(obj, name);
      if (listed(kOtherDictMethods, name)) type_error("the dict method '" + name + "' is not supported in chat templates");
      const Value* v = obj.dict->find(Value::string(name));
      return v ? *v : missing();
    }
    case Kind::List:
      if (listed(kListMethods, name)) type_error("the list method '" + name + "' is not supported in chat templates");
      return missing();
    case Kind::Namespace: {
      Value* v = obj.ns->find(name);
      return v ? *v : missing();
    }
    case Kind::Loop: {
      const auto& items = obj.list->items;
      const int64_t k = obj.i, n = static_cast<int64_t>(items.size());
      if (name == "index") return Value::integer(k + 1);
      if (name == "index0") return Value::integer(k);
      if (name == "revindex") return Value::integer(n - k);
      if (name == "revindex0") return Value::integer(n - k - 1);
      if (name == "first") return Value::boolean(k == 0);
      if (name == "last") return Value::boolean(k == n - 1);
      if (name == "length") return Value::integer(n);
      if (name == "depth") return Value::integer(1);
      if (name == "depth0") return Value::integer(0);
      if (name == "previtem")
        return k > 0 ? items[static_cast<size_t>(k - 1)] : Value::undefined("there is no previous item");
      if (name == "nextitem")
        return k + 1 < n ? items[static_cast<size_t>(k + 1)] : Value::undefined("there is no next item");
      if (name == "cycle" || name == "changed") type_error("loop." + name + "() is not supported in chat templates");
      return missing();
    }
    default: return missing();
  }
}

Value get_item(const Value& obj, const Value& key, Budget& budget) {
  throw_if_undefined(obj);
  auto by_name = [&]() {
    if (key.kind == Kind::String) return get_attr(obj, key.s);
    return Value::undefined(std::string("'") + type_name(obj) + " object' has no element " + py_repr(key));
  };
  if ((obj.kind == Kind::List || obj.kind == Kind::String) && key.is_integer()) {
    std::vector<size_t> cps;
    int64_t n;
    if (obj.kind == Kind::List) {
      n = static_cast<int64_t>(obj.list->items.size());
    } else {
      cps = utf8_offsets(obj.s);
      budget.step(cps.size() / 64);
      n = static_cast<int64_t>(cps.size()) - 1;
    }
    int64_t k = key.as_int();
    if (k < 0) k += n;
    if (k < 0 || k >= n) return by_name();
    if (obj.kind == Kind::List) return obj.list->items[static_cast<size_t>(k)];
    return substring(obj, cps[static_cast<size_t>(k)], cps[static_cast<size_t>(k) + 1]);
  }
  if (obj.kind == Kind::Dict && hashable(key)) {
    budget.step(obj.dict->items.size() / 8);
    const Value* v = obj.dict->find(key);
    if (v) return *v;
  }
  return by_name();
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step, Budget& budget) {
  throw_if_undefined(obj);
  if (obj.kind == Kind::Dict) type_error("unhashable type: 'slice'");
  for (const Value* v : {&start, &stop, &step})
    if (v->kind != Kind::None && !v->is_integer())
      return Value::undefined(std::string("'") + type_name(obj) + " object' cannot be sliced by " + type_name(*v));
  if (obj.kind != Kind::List && obj.kind != Kind::String)
    return Value::undefined(std::string("'") + type_name(obj) + " object' cannot be sliced");
  std::vector<size_t> cps;
  int64_t n;
  if (obj.kind == Kind::List) {
    n = static_cast<int64_t>(obj.list->items.size());
  } else {
    cps = utf8_offsets(obj.s);
    n = static_cast<int64_t>(cps.size()) - 1;
  }
  budget.step(static_cast<uint64_t>(n));
  int64_t st = step.kind == Kind::None ? 1 : step.as_int();
  if (st == 0) type_error("slice step cannot be zero");
  // Python's PySlice_AdjustIndices.
  auto adjust = [&](const Value& v, int64_t dflt) {
    if (v.kind == Kind::None) return dflt;
    int64_t x = v.as_int();
    if (x < 0) {
      x += n;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= n) {
      x = st < 0 ? n - 1 : n;
    }
    return x;
  };
  int64_t b = adjust(start, st < 0 ? n - 1 : 0), e = adjust(stop, st < 0 ? -1 : n);
  std::vector<int64_t> idx;
  for (int64_t k = b; st > 0 ? k < e : k > e; k += st) idx.push_back(k);
  if (obj.kind == Kind::String) {
    if (st == 1) {
      if (idx.empty()) return Value::string("");
      return substring(obj, cps[static_cast<size_t>(idx.front())], cps[static_cast<size_t>(idx.back()) + 1]);
    }
    std::string out;
    for (int64_t k : idx) out.append(obj.s, cps[static_cast<size_t>(k)], cps[static_cast<size_t>(k) + 1] - cps[static_cast<size_t>(k)]);
    return Value::string(std::move(out));
  }
  std::vector<Value> items;
  for (int64_t k : idx) items.push_back(obj.list->items[static_cast<size_t>(k)]);
  return Value::make_list(std::move(items), obj.list->tuple);
}

Value call_method(const Value& m, const Args& a, Budget& budget) {
  const Value& self = *m.self;
  const std::string& n = m.s;
  const std::string what = n + "()";
  if (self.kind == Kind::String) {
    if (n == "strip" || n == "lstrip" || n == "rstrip") {
      check_arity(a, 1, {"chars"}, what);
      return strip(self, n != "rstrip", n != "lstrip", arg(a, 0, "chars"));
    }
    if (n == "startswith" || n == "endswith") {
      check_arity(a, 1, {}, what);
      const Value* p = arg(a, 0, "");
      if (!p) type_error(what + " takes one argument");
      std::vector<Value> options = p->kind == Kind::List && p->list->tuple ? p->list->items : std::vector<Value>{*p};
      for (const Value& o : options) {
        const std::string& x = need_string(o, what + "'s argument");
        if (x.size() <= self.s.size() &&
            self.s.compare(n == "startswith" ? 0 : self.s.size() - x.size(), x.size(), x) == 0)
          return Value::boolean(true);
      }
      return Value::boolean(false);
    }
    if (n == "split") {
      check_arity(a, 2, {"sep", "maxsplit"}, what);
      const Value* mx = arg(a, 1, "maxsplit");
      auto parts = split(self.s, arg(a, 0, "sep"), mx ? need_int(*mx, "maxsplit") : -1);
      budget.step(parts.size());
      return Value::make_list(std::move(parts));
    }
    if (n == "upper" || n == "lower") {
      check_arity(a, 0, {}, what);
      return Value::string(n == "upper" ? py_upper(self.s) : py_lower(self.s));
    }
    if (n == "replace") {
      check_arity(a, 3, {"count"}, what);
      const Value* o = arg(a, 0, "");
      const Value* r = arg(a, 1, "");
      if (!o || !r) type_error("replace() takes at least two arguments");
      const Value* c = arg(a, 2, "count");
      return replace(self, need_string(*o, "replace()'s argument"), need_string(*r, "replace()'s argument"),
                     c ? need_int(*c, "count") : -1, budget);
    }
    if (n == "find") {
      check_arity(a, 1, {}, what);
      const Value* x = arg(a, 0, "");
      if (!x) type_error("find() takes one argument");
      size_t q = self.s.find(need_string(*x, "find()'s argument"));
      return Value::integer(q == std::string::npos ? -1 : static_cast<int64_t>(utf8_length(self.s.substr(0, q))));
    }
    if (n == "join") {
      check_arity(a, 1, {}, what);
      const Value* x = arg(a, 0, "");
      if (!x) type_error("join() takes one argument");
      std::vector<Value> items = iterate(*x, budget);
      std::string out;
      std::shared_ptr<const Regions> regions;
      for (size_t k = 0; k < items.size(); ++k) {
        if (items[k].kind != Kind::String)
          type_error("sequence item " + std::to_string(k) + ": expected str instance, " + type_name(items[k]) + " found");
        if (k) out += self.s;
        append_with_regions(out, regions, items[k].s, items[k].regions);
        budget.check_string(out.size());
      }
      return Value::string(std::move(out), regions);
    }
  }
  if (self.kind == Kind::Dict) {
    const auto& items = self.dict->items;
    budget.step(items.size());
    if (n == "items" || n == "keys" || n == "values") {
      check_arity(a, 0, {}, what);
      std::vector<Value> out;
      for (const auto& kv : items) {
        if (n == "items") out.push_back(Value::make_list({kv.first, kv.second}, true));
        else out.push_back(n == "keys" ? kv.first : kv.second);
      }
      return Value::make_list(std::move(out));
    }
    if (n == "get") {
      check_arity(a, 2, {}, what);
      const Value* k = arg(a, 0, "");
      if (!k) type_error("get() takes at least one argument");
      const Value* v = hashable(*k) ? self.dict->find(*k) : nullptr;
      if (v) return *v;
      const Value* d = arg(a, 1, "");
      return d ? *d : Value::none();
    }
  }
  type_error("the method " + what + " is not supported");
}

Value call_global(const std::string& name, const Args& a, Budget& budget) {
  if (name == "raise_exception") {
    const Value* m = arg(a, 0, "message");
    throw RaisedError(m ? py_str(*m) : std::string());
  }
  if (name == "strftime_now") {
    check_arity(a, 1, {"format"}, "strftime_now()");
    const Value* f = arg(a, 0, "format");
    if (!f) type_error("strftime_now() takes a format");
    const std::string& fmt = need_string(*f, "strftime_now()'s format");
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[512];
    size_t len = fmt.size() < 200 ? std::strftime(buf, sizeof buf, fmt.c_str(), &tm) : 0;
    if (len == 0 && !fmt.empty()) type_error("strftime_now(): the format gives no text or more than 512 bytes");
    return Value::string(std::string(buf, len));
  }
  if (name == "namespace" || name == "dict") {
    std::vector<std::pair<Value, Value>> items;
    if (a.pos.size() > 1) type_error(name + "() takes at most one positional argument");
    if (a.pos.size() == 1) {
      if (a.pos[0].kind != Kind::Dict) type_error(name + "()'s positional argument must be a dict");
      items = a.pos[0].dict->items;
    }
    for (const auto& kv : a.kw) {
      Value key = Value::string(kv.first);
      auto it = std::find_if(items.begin(), items.end(), [&](const auto& x) { return equal(x.first, key); });
      if (it != items.end()) it->second = kv.second;
      else items.emplace_back(key, kv.second);
    }
    if (name == "dict") return Value::make_dict(std::move(items));
    Value v;
    v.kind = Kind::Namespace;
    v.ns = std::make_shared<NamespaceData>();
    for (auto& kv : items) {
      if (kv.first.kind != Kind::String) type_error("namespace() keys must be strings");
      if (!kv.first.s.empty() && kv.first.s[0] == '_') type_error("namespace attributes may not start with '_'");
      v.ns->attrs.emplace_back(kv.first.s, kv.second);
    }
    return v;
  }
  if (name == "range") {
    if (!a.kw.empty() || a.pos.empty() || a.pos.size() > 3) type_error("range() takes 1 to 3 integers");
    int64_t start = 0, stop, step = 1;
    if (a.pos.size() == 1) {
      stop = need_int(a.pos[0], "range()'s argument");
    } else {
      start = need_int(a.pos[0], "range()'s argument");
      stop = need_int(a.pos[1], "range()'s argument");
      if (a.pos.size() == 3) step = need_int(a.pos[2], "range()'s argument");
    }
    if (step == 0) type_error("range() arg 3 must not be zero");
    long double count = step > 0 ? (static_cast<long double>(stop) - start) / step
                                 : (static_cast<long double>(start) - stop) / -step;
    if (count > static_cast<long double>(budget.limits().max_string_bytes) / 16)
      type_error("range() of " + std::to_string(static_cast<double>(count)) + " items is too long");
    std::vector<Value> items;
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) items.push_back(Value::integer(k));
    budget.step(items.size());
    return Value::make_list(std::move(items));
  }
  type_error("unknown function '" + name + "'");
}


}  // namespace dt::io::jinja
