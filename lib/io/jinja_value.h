// Values of the Jinja interpreter behind chat templates (lib/io/chat_template.h).
//
// The interpreter reproduces what Python's jinja2 prints, so a value follows Python's rules:
// truthiness, ==, <, str() and repr() of lists and dicts, json.dumps for `tojson`. Strings
// are UTF-8 (checked where they enter); operations that Python defines on code points
// (len, indexing, slicing, strip) work on code points. Lists, tuples and dicts are
// immutable once built (the templates run in jinja2's ImmutableSandboxedEnvironment) and
// shared by pointer; a namespace() is the one mutable object.
//
// A string may carry regions: byte ranges copied from a message's content. They follow
// the bytes through +, ~, strip and slicing, so a render knows where each message's content
// landed in the output (ChatTemplate::assistant_spans).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dt::io::jinja {

struct Region {
  size_t begin, end;  // bytes of the string
  int tag;            // the message index
};
using Regions = std::vector<Region>;

// Loop is a for loop's `loop` variable: i is the index0 and list the items walked.
enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function, Method, Loop };

struct ListData;
struct DictData;
struct NamespaceData;
struct Value;

// Containers nest at most this deep (a template building [[[[...]]]] in a loop would
// otherwise make printing and destruction recurse without bound).
constexpr int kMaxValueDepth = 200;

struct Value {
  Kind kind = Kind::Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  // String: the text. Undefined: the message jinja2 gives when it is used (e.g. "'x' is
  // undefined"). Function / Method: the name.
  std::string s;
  std::shared_ptr<const Regions> regions;  // String only; null when none
  std::shared_ptr<const ListData> list;    // List (and tuple); Loop: the items
  std::shared_ptr<const DictData> dict;
  std::shared_ptr<NamespaceData> ns;
  std::shared_ptr<const Value> self;       // Method: the object it is bound to

  static Value undefined(std::string why) { Value v; v.s = std::move(why); return v; }
  static Value none() { Value v; v.kind = Kind::None; return v; }
  static Value boolean(bool x) { Value v; v.kind = Kind::Bool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.kind = Kind::Int; v.i = x; return v; }
  static Value real(double x) { Value v; v.kind = Kind::Float; v.f = x; return v; }
  static Value string(std::string x, std::shared_ptr<const Regions> r = nullptr);
  static Value make_list(std::vector<Value> items, bool tuple = false);  // checks the depth
  static Value make_dict(std::vector<std::pair<Value, Value>> items);    // keys unique
  static Value function(std::string name) { Value v; v.kind = Kind::Function; v.s = std::move(name); return v; }
  static Value method(const Value& obj, std::string name);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_string() const { return kind == Kind::String; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  bool is_integer() const { return kind == Kind::Int || kind == Kind::Bool; }  // Python: bool is an int
  int64_t as_int() const { return kind == Kind::Bool ? (b ? 1 : 0) : i; }
  double as_double() const { return kind == Kind::Float ? f : static_cast<double>(as_int()); }
  int depth() const;  // 0 for scalars
  bool holds_namespace() const;
};

struct ListData {
  std::vector<Value> items;
  bool tuple = false;
  int depth = 1;
  bool has_ns = false;
};

struct DictData {
  std::vector<std::pair<Value, Value>> items;  // insertion order, as Python's dict
  int depth = 1;
  bool has_ns = false;
  const Value* find(const Value& key) const;  // nullptr when absent
};

struct NamespaceData {
  std::vector<std::pair<std::string, Value>> attrs;
  Value* find(const std::string& name);
};

// Python's names for the types, as in its error messages ("'dict object' has no attribute").
const char* type_name(const Value& v);

// Throws std::runtime_error: an error without a line, which the evaluator reports with the
// line of the expression it was evaluating.
[[noreturn]] void type_error(const std::string& message);

bool truthy(const Value& v);
bool equal(const Value& a, const Value& b);
// a < b as Python orders numbers, strings (by code point, which UTF-8 byte order keeps) and
// sequences; anything else throws (message without a line: the caller adds it).
bool less(const Value& a, const Value& b);
bool hashable(const Value& v);

// str(v) as jinja2 prints it (Undefined prints nothing); repr(v) as in a list's str().
// Both throw for functions and methods.
std::string py_str(const Value& v);
std::string py_repr(const Value& v);
std::string py_float_repr(double x);
// json.dumps(v, ensure_ascii=False, indent=..., separators=..., sort_keys=...): indent < 0
// means None.
std::string to_json(const Value& v, int indent, const std::string& item_sep, const std::string& key_sep,
                    bool sort_keys);

// ---- UTF-8 and Python's str methods on code points (jinja_unicode.cc)
size_t utf8_decode_at(const std::string& s, size_t p, uint32_t* cp);  // s valid UTF-8; returns the length
void utf8_append(uint32_t cp, std::string& out);
bool utf8_valid(const std::string& s);
size_t utf8_length(const std::string& s);  // code points
std::vector<size_t> utf8_offsets(const std::string& s);  // byte offset of each code point, then s.size()
bool py_isspace(uint32_t cp);
// The byte range [begin, end) of s that Python's strip/lstrip/rstrip keeps; chars == nullptr
// strips whitespace, otherwise the code points of *chars.
std::pair<size_t, size_t> py_strip_range(const std::string& s, bool left, bool right, const std::string* chars);
std::string py_upper(const std::string& s);
std::string py_lower(const std::string& s);
// The regions of `r` that fall in bytes [begin, end) of their string, moved to start at 0.
std::shared_ptr<const Regions> clip_regions(const std::shared_ptr<const Regions>& r, size_t begin, size_t end);
// Appends `b` (with its regions) to the string `a` (with its regions).
void append_with_regions(std::string& a, std::shared_ptr<const Regions>& ra, const std::string& b,
                         const std::shared_ptr<const Regions>& rb);

}  // namespace dt::io::jinja
