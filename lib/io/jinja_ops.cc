// Python's operators on Jinja values: comparisons and arithmetic (+ - * / // % **), with
// 64-bit integers that refuse to overflow, and repetition bounded by the limits.
#include <cmath>
#include <stdexcept>

#include "io/jinja_eval.h"

namespace dt::io::jinja {

namespace {

Value repeat(const Value& seq, int64_t n, Budget& budget) {
  if (n < 0) n = 0;
  size_t unit = seq.kind == Kind::String ? seq.s.size() : seq.list->items.size();
  if (unit && static_cast<uint64_t>(n) > budget.limits().max_string_bytes / unit)
    budget.check_string(budget.limits().max_string_bytes + 1);
  budget.step(unit * static_cast<size_t>(n) / 64);
  if (seq.kind == Kind::String) {
    std::string out;
    for (int64_t k = 0; k < n; ++k) out += seq.s;
    return Value::string(std::move(out));
  }
  std::vector<Value> items;
  for (int64_t k = 0; k < n; ++k) items.insert(items.end(), seq.list->items.begin(), seq.list->items.end());
  return Value::make_list(std::move(items), seq.list->tuple);
}

}  // namespace

bool compare(const std::string& op, const Value& a, const Value& b, Budget& budget) {
  if (op == "==") return equal(a, b);
  if (op == "!=") return !equal(a, b);
  if (op == "in" || op == "notin") {
    Args args;
    args.pos.push_back(b);
    bool in = apply_test("in", a, args);
    if (b.kind == Kind::List) budget.step(b.list->items.size());
    else if (b.kind == Kind::Dict) budget.step(b.dict->items.size());
    else if (b.kind == Kind::String) budget.step(b.s.size() / 64);
    return op == "in" ? in : !in;
  }
  throw_if_undefined(a);
  throw_if_undefined(b);
  if (op == "<") return less(a, b);
  if (op == ">") return less(b, a);
  if (op == "<=") return less(a, b) || equal(a, b);
  return less(b, a) || equal(a, b);  // >=
}

Value arith(const std::string& op, const Value& a, const Value& b, Budget& budget) {
  throw_if_undefined(a);
  throw_if_undefined(b);
  auto unsupported = [&]() -> Value {
    type_error("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
  };
  const bool nums = a.is_number() && b.is_number();
  const bool ints = a.is_integer() && b.is_integer();
  auto overflow = []() -> Value { type_error("integer overflow (templates compute with 64-bit integers)"); };
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) return overflow();
      return Value::integer(r);
    }
    if (nums) return Value::real(a.as_double() + b.as_double());
    if (a.kind == Kind::String && b.kind == Kind::String) {
      budget.check_string(a.s.size() + b.s.size());
      budget.step((a.s.size() + b.s.size()) / 4096);
      std::string out = a.s;
      std::shared_ptr<const Regions> regions = a.regions;
      append_with_regions(out, regions, b.s, b.regions);
      return Value::string(std::move(out), regions);
    }
    if (a.kind == Kind::List && b.kind == Kind::List && a.list->tuple == b.list->tuple) {
      budget.check_string(a.list->items.size() + b.list->items.size());
      budget.step(a.list->items.size() + b.list->items.size());
      std::vector<Value> items = a.list->items;
      items.insert(items.end(), b.list->items.begin(), b.list->items.end());
      return Value::make_list(std::move(items), a.list->tuple);
    }
    if (a.kind == Kind::String) type_error(std::string("can only concatenate str (not \"") + type_name(b) + "\") to str");
    if (a.kind == Kind::List)
      type_error(std::string("can only concatenate ") + type_name(a) + " (not \"" + type_name(b) + "\") to " +
                 type_name(a));
    return unsupported();
  }
  if (op == "*") {
    if (ints) {
      int64_t r;
      if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) return overflow();
      return Value::integer(r);
    }
    if (nums) return Value::real(a.as_double() * b.as_double());
    if ((a.kind == Kind::String || a.kind == Kind::List) && b.is_integer()) return repeat(a, b.as_int(), budget);
    if ((b.kind == Kind::String || b.kind == Kind::List) && a.is_integer()) return repeat(b, a.as_int(), budget);
    return unsupported();
  }
  if (!nums) {
    if (op == "%" && a.kind == Kind::String) type_error("string formatting with % is not supported");
    return unsupported();
  }
  if (op == "-") {
    if (ints) {
      int64_t r;
      if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) return overflow();
      return Value::integer(r);
    }
    return Value::real(a.as_double() - b.as_double());
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t r = 1, base = a.as_int();
      for (int64_t k = 0; k < b.as_int(); ++k) {
        if (__builtin_mul_overflow(r, base, &r)) return overflow();
        if (r == 0 || r == 1) break;
        budget.step();
      }
      return Value::integer(r);
    }
    return Value::real(std::pow(a.as_double(), b.as_double()));
  }
  bool zero = ints ? b.as_int() == 0 : b.as_double() == 0;
  if (zero) type_error(op == "/" ? "division by zero" : "integer division or modulo by zero");
  if (op == "/") return Value::real(a.as_double() / b.as_double());
  if (ints) {
    int64_t x = a.as_int(), y = b.as_int();
    if (x == INT64_MIN && y == -1) return overflow();
    int64_t q = x / y, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) {
      q -= 1;
      r += y;
    }
    return Value::integer(op == "//" ? q : r);
  }
  double x = a.as_double(), y = b.as_double();
  double m = std::fmod(x, y);
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  if (op == "//") return Value::real(std::floor((x - m) / y));
  return Value::real(m);
}

}  // namespace dt::io::jinja
