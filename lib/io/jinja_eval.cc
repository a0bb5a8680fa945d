// The Jinja evaluator: runs a parsed template with jinja2's semantics (scoping: a for loop's
// body gets a fresh scope each iteration, `if` gets none; Python's operators; Undefined).
#include <cmath>
#include <stdexcept>

#include "core/error.h"
#include "io/jinja_eval.h"

namespace dt::io::jinja {

void fail_at(int line, const std::string& what) {
  fail(DT_ERR_INVALID_ARGUMENT, "chat template line " + std::to_string(line) + ": " + what);
}

void Budget::step(uint64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps)
    throw std::runtime_error("the template ran more than " + std::to_string(limits_.max_steps) +
                             " steps; the limit for one render");
}

void Budget::check_string(size_t bytes) const {
  if (bytes > limits_.max_string_bytes)
    throw std::runtime_error("a value of " + std::to_string(bytes) + " bytes or items; the limit is " +
                             std::to_string(limits_.max_string_bytes));
}

namespace {

enum class Flow { Normal, Break, Continue };

struct Sink {
  std::string text;
  Regions regions;
};

using Frame = std::vector<std::pair<std::string, Value>>;

class Renderer {
 public:
  Renderer(const Limits& limits, const std::vector<std::pair<std::string, Value>>& vars)
      : limits_(limits), budget_(limits) {
    Frame globals;
    for (const char* f : {"raise_exception", "strftime_now", "namespace", "dict", "range"})
      globals.emplace_back(f, Value::function(f));
    for (const auto& kv : vars) set_in(globals, kv.first, kv.second);
    frames_.push_back(std::move(globals));
    frames_.emplace_back();  // the template's own scope
  }

  RenderResult run(const std::vector<Stmt>& body) {
    sinks_.emplace_back();
    exec(body);
    RenderResult r;
    r.text = std::move(sinks_.back().text);
    r.regions = std::move(sinks_.back().regions);
    r.generation = std::move(generation_);
    return r;
  }

 private:
  const Limits& limits_;
  Budget budget_;
  std::vector<Frame> frames_;
  std::vector<Sink> sinks_;
  std::vector<std::pair<size_t, size_t>> generation_;

  static void set_in(Frame& f, const std::string& name, Value v) {
    for (auto& kv : f)
      if (kv.first == name) {
        kv.second = std::move(v);
        return;
      }
    f.emplace_back(name, std::move(v));
  }

  Value lookup(const std::string& name) const {
    for (size_t k = frames_.size(); k-- > 0;)
      for (const auto& kv : frames_[k])
        if (kv.first == name) return kv.second;
    return Value::undefined("'" + name + "' is undefined");
  }

  void write(const std::string& s, const std::shared_ptr<const Regions>& regions) {
    Sink& sink = sinks_.back();
    if (sink.text.size() + s.size() > limits_.max_output_bytes)
      throw std::runtime_error("the output passed " + std::to_string(limits_.max_output_bytes) +
                               " bytes; the limit for one render");
    if (regions)
      for (const Region& g : *regions)
        sink.regions.push_back({g.begin + sink.text.size(), g.end + sink.text.size(), g.tag});
    sink.text += s;
  }

  // ---------------------------------------------------------------- statements

  Flow exec(const std::vector<Stmt>& body) {
    for (const Stmt& s : body) {
      Flow f = exec_one(s);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Flow exec_one(const Stmt& s) {
    try {
      budget_.step();
      switch (s.kind) {
        case St::Text: write(s.text, nullptr); return Flow::Normal;
        case St::Print: {
          Value v = eval(*s.expr);
          if (v.kind == Kind::String) write(v.s, v.regions);
          else write(py_str(v), nullptr);
          return Flow::Normal;
        }
        case St::If:
          for (const auto& br : s.branches)
            if (!br.first || truthy(eval(*br.first))) return exec(br.second);
          return Flow::Normal;
        case St::For: return exec_for(s);
        case St::Set: assign(s.target, eval(*s.expr)); return Flow::Normal;
        case St::SetBlock: {
          sinks_.emplace_back();
          frames_.emplace_back();
          exec(s.body);
          frames_.pop_back();
          Sink captured = std::move(sinks_.back());
          sinks_.pop_back();
          auto regions = captured.regions.empty() ? nullptr : std::make_shared<const Regions>(captured.regions);
          assign(s.target, Value::string(std::move(captured.text), regions));
          return Flow::Normal;
        }
        case St::Generation: {
          size_t start = sinks_.back().text.size();
          frames_.emplace_back();
          exec(s.body);
          frames_.pop_back();
          if (sinks_.size() == 1) generation_.emplace_back(start, sinks_.back().text.size());
          return Flow::Normal;
        }
        case St::Break: return Flow::Break;
        case St::Continue: return Flow::Continue;
      }
    } catch (const Error&) {
      throw;
    } catch (const RaisedError& e) {
      fail(DT_ERR_INVALID_ARGUMENT, "chat template line " + std::to_string(s.line) + " raised: " + e.what());
    } catch (const std::runtime_error& e) {
      fail_at(s.line, e.what());
    }
    return Flow::Normal;
  }

  void bind(Frame& frame, const Target& t, const Value& v) {
    if (!t.unpack) {
      set_in(frame, t.names[0], v);
      return;
    }
    std::vector<Value> items = iterate(v, budget_);
    if (items.size() != t.names.size())
      type_error(items.size() > t.names.size()
                     ? "too many values to unpack (expected " + std::to_string(t.names.size()) + ")"
                     : "not enough values to unpack (expected " + std::to_string(t.names.size()) + ", got " +
                           std::to_string(items.size()) + ")");
    for (size_t k = 0; k < items.size(); ++k) set_in(frame, t.names[k], items[k]);
  }

  void assign(const Target& t, const Value& v) {
    if (t.attr.empty()) {
      bind(frames_.back(), t, v);
      return;
    }
    Value target = lookup(t.names[0]);
    if (target.kind != Kind::Namespace)
      type_error("cannot set the attribute '" + t.attr + "' of '" + t.names[0] + "': it is not a namespace()");
    if (!t.attr.empty() && t.attr[0] == '_') type_error("namespace attributes may not start with '_'");
    if (v.holds_namespace()) type_error("a namespace() cannot hold another namespace()");
    Value* slot = target.ns->find(t.attr);
    if (slot) *slot = v;
    else target.ns->attrs.emplace_back(t.attr, v);
  }

  Flow exec_for(const Stmt& s) {
    std::vector<Value> items = iterate(eval(*s.expr), budget_);
    if (s.filter) {
      std::vector<Value> kept;
      for (Value& item : items) {
        frames_.emplace_back();
        bind(frames_.back(), s.target, item);
        bool keep = truthy(eval(*s.filter));
        frames_.pop_back();
        if (keep) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      frames_.emplace_back();
      exec(s.else_body);
      frames_.pop_back();
      return Flow::Normal;
    }
    const Value walked = Value::make_list(std::move(items));
    const size_t n = walked.list->items.size();
    for (size_t k = 0; k < n; ++k) {
      budget_.step();
      Value loop;
      loop.kind = Kind::Loop;
      loop.i = static_cast<int64_t>(k);
      loop.list = walked.list;
      frames_.emplace_back();
      bind(frames_.back(), s.target, walked.list->items[k]);
      frames_.back().emplace_back("loop", std::move(loop));
      Flow f = exec(s.body);
      frames_.pop_back();
      if (f == Flow::Break) break;
    }
    return Flow::Normal;
  }

  // ---------------------------------------------------------------- expressions

  Value eval(const Expr& e) {
    try {
      budget_.step();
      return eval_node(e);
    } catch (const Error&) {
      throw;
    } catch (const RaisedError& err) {
      fail(DT_ERR_INVALID_ARGUMENT, "chat template line " + std::to_string(e.line) + " raised: " + err.what());
    } catch (const std::runtime_error& err) {
      fail_at(e.line, err.what());
    }
  }

  Args eval_args(const Expr& e, size_t first) {
    Args a;
    for (size_t k = first; k < e.args.size(); ++k) a.pos.push_back(eval(*e.args[k]));
    for (const auto& kv : e.kwargs) a.kw.emplace_back(kv.first, eval(*kv.second));
    return a;
  }

  Value eval_node(const Expr& e) {
    switch (e.kind) {
      case Ex::Const: return e.value;
      case Ex::Name: return lookup(e.name);
      case Ex::List:
      case Ex::Tuple: {
        std::vector<Value> items;
        for (const auto& a : e.args) items.push_back(eval(*a));
        return Value::make_list(std::move(items), e.kind == Ex::Tuple);
      }
      case Ex::Dict: {
        std::vector<std::pair<Value, Value>> items;
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
          Value key = eval(*e.args[k]);
          Value val = eval(*e.args[k + 1]);
          if (!hashable(key)) type_error(std::string("unhashable type: '") + type_name(key) + "'");
          bool replaced = false;
          for (auto& kv : items)
            if (equal(kv.first, key)) {
              kv.second = val;
              replaced = true;
            }
          if (!replaced) items.emplace_back(std::move(key), std::move(val));
        }
        return Value::make_dict(std::move(items));
      }
      case Ex::Getattr: return get_attr(eval(*e.args[0]), e.name);
      case Ex::Getitem: {
        Value obj = eval(*e.args[0]);
        const Expr& key = *e.args[1];
        if (key.kind == Ex::Slice) {
          auto part = [&](size_t k) { return key.args[k] ? eval(*key.args[k]) : Value::none(); };
          Value a = part(0), b = part(1), c = part(2);
          return slice(obj, a, b, c, budget_);
        }
        return get_item(obj, eval(key), budget_);
      }
      case Ex::Slice: type_error("a slice outside []");
      case Ex::Call: {
        Value f = eval(*e.args[0]);
        Args a = eval_args(e, 1);
        if (f.kind == Kind::Function) return call_global(f.s, a, budget_);
        if (f.kind == Kind::Method) return call_method(f, a, budget_);
        throw_if_undefined(f);
        type_error(std::string("'") + type_name(f) + "' object is not callable");
      }
      case Ex::Filter: {
        Value subject = eval(*e.args[0]);
        return apply_filter(e.name, subject, eval_args(e, 1), budget_);
      }
      case Ex::Test: {
        Value subject = eval(*e.args[0]);
        return Value::boolean(apply_test(e.name, subject, eval_args(e, 1)));
      }
      case Ex::Not: return Value::boolean(!truthy(eval(*e.args[0])));
      case Ex::Neg:
      case Ex::Pos: {
        Value v = eval(*e.args[0]);
        throw_if_undefined(v);
        if (!v.is_number())
          type_error(std::string("bad operand type for unary ") + (e.kind == Ex::Neg ? "-" : "+") + ": '" +
                     type_name(v) + "'");
        if (e.kind == Ex::Pos) return v.kind == Kind::Float ? v : Value::integer(v.as_int());
        if (v.kind == Kind::Float) return Value::real(-v.f);
        if (v.as_int() == INT64_MIN) type_error("integer overflow (templates compute with 64-bit integers)");
        return Value::integer(-v.as_int());
      }
      case Ex::And: {
        Value a = eval(*e.args[0]);
        return truthy(a) ? eval(*e.args[1]) : a;
      }
      case Ex::Or: {
        Value a = eval(*e.args[0]);
        return truthy(a) ? a : eval(*e.args[1]);
      }
      case Ex::Compare: {
        Value left = eval(*e.args[0]);
        for (size_t k = 0; k < e.ops.size(); ++k) {
          Value right = eval(*e.args[k + 1]);
          if (!compare(e.ops[k], left, right, budget_)) return Value::boolean(false);
          left = std::move(right);
        }
        return Value::boolean(true);
      }
      case Ex::Binary: {
        Value a = eval(*e.args[0]);
        return arith(e.name, a, eval(*e.args[1]), budget_);
      }
      case Ex::Concat: {
        std::string out;
        std::shared_ptr<const Regions> regions;
        for (const auto& a : e.args) {
          Value v = eval(*a);
          std::string s = v.kind == Kind::String ? v.s : py_str(v);
          budget_.check_string(out.size() + s.size());
          budget_.step(s.size() / 4096);
          append_with_regions(out, regions, s, v.kind == Kind::String ? v.regions : nullptr);
        }
        return Value::string(std::move(out), regions);
      }
      case Ex::Cond: {
        if (truthy(eval(*e.args[1]))) return eval(*e.args[0]);
        if (e.args[2]) return eval(*e.args[2]);
        return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                                " evaluated to false and no else section was defined.");
      }
    }
    type_error("unknown expression");
  }
};

}  // namespace

namespace {
bool any_generation(const std::vector<Stmt>& body) {
  for (const Stmt& s : body) {
    if (s.kind == St::Generation || any_generation(s.body) || any_generation(s.else_body)) return true;
    for (const auto& br : s.branches)
      if (any_generation(br.second)) return true;
  }
  return false;
}
}  // namespace

Template Template::parse(const std::string& source, const Limits& limits) {
  Template t;
  t.body_ = std::make_shared<const std::vector<Stmt>>(parse_template(source, limits));
  t.limits_ = limits;
  t.has_generation_ = any_generation(*t.body_);
  return t;
}

RenderResult Template::render(const std::vector<std::pair<std::string, Value>>& vars) const {
  DT_ASSERT(body_ != nullptr);
  return Renderer(limits_, vars).run(*body_);
}

}  // namespace dt::io::jinja
