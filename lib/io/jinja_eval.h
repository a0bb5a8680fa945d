// Inside the Jinja interpreter: what the parser, the evaluator and the built-ins share.
#pragma once
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "io/jinja.h"
#include "io/jinja_ast.h"

namespace dt::io::jinja {

std::vector<Stmt> parse_template(const std::string& source, const Limits& limits);

// Arguments of a call, filter or test, evaluated.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

// Charged by the built-ins for the work they do (items copied, bytes built).
class Budget {
 public:
  explicit Budget(const Limits& l) : limits_(l) {}
  void step(uint64_t n = 1);
  void check_string(size_t bytes) const;  // a string or list about to be built
  const Limits& limits() const { return limits_; }

 private:
  const Limits& limits_;
  uint64_t steps_ = 0;
};

// The built-ins; they throw std::runtime_error (or dt::Error), which the evaluator reports
// with the line. `name` is known to exist: the parser checked it.
bool known_filter(const std::string& name);
bool known_test(const std::string& name);
std::string known_filters();
std::string known_tests();
Value apply_filter(const std::string& name, const Value& subject, const Args& args, Budget& budget);
bool apply_test(const std::string& name, const Value& subject, const Args& args);
// obj.name as jinja2's sandbox resolves it: a method when `name` is one, else an item.
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key, Budget& budget);
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step, Budget& budget);
Value call_method(const Value& method, const Args& args, Budget& budget);
// The globals: raise_exception, strftime_now, namespace, dict, range. raise_exception
// throws RaisedError.
Value call_global(const std::string& name, const Args& args, Budget& budget);
std::vector<Value> iterate(const Value& v, Budget& budget);  // what `for` walks

// Python's operators (jinja_ops.cc): op is == != < <= > >= in notin, or + - * / // % **.
bool compare(const std::string& op, const Value& a, const Value& b, Budget& budget);
Value arith(const std::string& op, const Value& a, const Value& b, Budget& budget);

// Whether `n` is one of `names`.
template <size_t N>
bool listed(const char* const (&names)[N], const std::string& n) {
  for (const char* x : names)
    if (n == x) return true;
  return false;
}

// Helpers of the built-ins (jinja_strings.cc).
void throw_if_undefined(const Value& v);                    // using an Undefined fails
// The argument at `pos` or named `kw`; nullptr when neither was given.
const Value* arg(const Args& a, size_t pos, const char* kw);
void check_arity(const Args& a, size_t max_pos, std::initializer_list<const char*> kws, const std::string& what);
const std::string& need_string(const Value& v, const std::string& what);
int64_t need_int(const Value& v, const std::string& what);
Value substring(const Value& s, size_t begin, size_t end);  // bytes; keeps the regions inside
Value strip(const Value& s, bool left, bool right, const Value* chars);
std::vector<Value> split(const std::string& s, const Value* sep, int64_t maxsplit);
Value replace(const Value& s, const std::string& old, const std::string& repl, int64_t count, Budget& budget);
std::string title_filter(const std::string& s);  // jinja2's title, not str.title

struct RaisedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace dt::io::jinja
