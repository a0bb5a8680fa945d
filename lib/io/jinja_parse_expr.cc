// The Jinja parser, expressions: jinja2's precedence climbing, postfix subscripts and
// calls, filters and tests.
#include "io/jinja_parser.h"

namespace dt::io::jinja {

bool Parser::tuple_end(const std::vector<const char*>& extra) const {
  if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || is_op(")")) return true;
  for (const char* e : extra)
    if (is_name(e)) return true;
  return false;
}

ExprPtr Parser::parse_tuple(bool simplified, bool with_condexpr, const std::vector<const char*>& extra, bool parens) {
  const int line = cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  for (;;) {
    if (!items.empty()) expect_op(",");
    if (tuple_end(extra)) break;
    items.push_back(simplified ? primary() : parse_expression(with_condexpr));
    if (is_op(",")) is_tuple = true;
    else break;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!parens) unexpected("an expression");
  }
  return with(node(Ex::Tuple, line), std::move(items));
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  Nest nest(*this, cur().line);
  if (!with_condexpr) return parse_or();
  const int line = cur().line;
  ExprPtr e = parse_or();
  while (skip_name("if")) {
    ExprPtr cond = parse_or();
    ExprPtr other;
    if (skip_name("else")) other = parse_expression(true);
    std::vector<ExprPtr> v;
    v.push_back(std::move(e));
    v.push_back(std::move(cond));
    v.push_back(std::move(other));
    e = with(node(Ex::Cond, line), std::move(v));
  }
  return e;
}

ExprPtr Parser::parse_or() {
  ExprPtr e = parse_and();
  while (is_name("or")) {
    int line = cur().line;
    next();
    e = binary(Ex::Or, line, "or", std::move(e), parse_and());
  }
  return e;
}

ExprPtr Parser::parse_and() {
  ExprPtr e = parse_not();
  while (is_name("and")) {
    int line = cur().line;
    next();
    e = binary(Ex::And, line, "and", std::move(e), parse_not());
  }
  return e;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    int line = cur().line;
    Nest nest(*this, line);
    next();
    return unary(Ex::Not, line, parse_not());
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const int line = cur().line;
  ExprPtr first = parse_math1();
  auto e = node(Ex::Compare, line);
  std::vector<ExprPtr> operands;
  operands.push_back(std::move(first));
  for (;;) {
    static const char* const ops[] = {"==", "!=", "<", "<=", ">", ">="};
    std::string op;
    for (const char* o : ops)
      if (is_op(o)) op = o;
    if (!op.empty()) {
      next();
    } else if (is_name("in")) {
      op = "in";
      next();
    } else if (is_name("not") && look().type == Tok::Name && look().text == "in") {
      op = "notin";
      next();
      next();
    } else {
      break;
    }
    e->ops.push_back(op);
    operands.push_back(parse_math1());
  }
  if (e->ops.empty()) return std::move(operands[0]);
  return with(std::move(e), std::move(operands));
}

ExprPtr Parser::parse_math1() {
  ExprPtr e = parse_concat();
  while (is_op("+") || is_op("-")) {
    std::string op = cur().text;
    int line = cur().line;
    next();
    e = binary(Ex::Binary, line, op, std::move(e), parse_concat());
  }
  return e;
}

ExprPtr Parser::parse_concat() {
  const int line = cur().line;
  std::vector<ExprPtr> parts;
  parts.push_back(parse_math2());
  while (skip_op("~")) parts.push_back(parse_math2());
  if (parts.size() == 1) return std::move(parts[0]);
  return with(node(Ex::Concat, line), std::move(parts));
}

ExprPtr Parser::parse_math2() {
  ExprPtr e = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    std::string op = cur().text;
    int line = cur().line;
    next();
    e = binary(Ex::Binary, line, op, std::move(e), parse_pow());
  }
  return e;
}

ExprPtr Parser::parse_pow() {
  ExprPtr e = parse_unary(true);
  while (is_op("**")) {
    int line = cur().line;
    next();
    e = binary(Ex::Binary, line, "**", std::move(e), parse_unary(true));
  }
  return e;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  const int line = cur().line;
  Nest nest(*this, line);
  ExprPtr e;
  if (skip_op("-")) e = unary(Ex::Neg, line, parse_unary(false));
  else if (skip_op("+")) e = unary(Ex::Pos, line, parse_unary(false));
  else e = primary();
  e = postfix(std::move(e));
  if (with_filter) e = filter_expr(std::move(e));
  return e;
}

ExprPtr Parser::primary() {
  const Token t = cur();
  if (t.type == Tok::Name) {
    next();
    auto e = node(Ex::Const, t.line);
    if (t.text == "true" || t.text == "True") e->value = Value::boolean(true);
    else if (t.text == "false" || t.text == "False") e->value = Value::boolean(false);
    else if (t.text == "none" || t.text == "None") e->value = Value::none();
    else e->kind = Ex::Name, e->name = t.text;
    return e;
  }
  if (t.type == Tok::String) {
    std::string s;
    while (cur().type == Tok::String) {
      s += cur().text;
      next();
    }
    auto e = node(Ex::Const, t.line);
    e->value = Value::string(std::move(s));
    return e;
  }
  if (t.type == Tok::Int || t.type == Tok::Float) {
    next();
    auto e = node(Ex::Const, t.line);
    e->value = t.type == Tok::Int ? Value::integer(t.ival) : Value::real(t.fval);
    return e;
  }
  if (is_op("(")) {
    next();
    ExprPtr e = parse_tuple(false, true, {}, true);
    expect_op(")");
    return e;
  }
  if (is_op("[")) {
    next();
    std::vector<ExprPtr> items;
    while (!is_op("]")) {
      if (!items.empty()) expect_op(",");
      if (is_op("]")) break;
      items.push_back(parse_expression(true));
    }
    next();
    return with(node(Ex::List, t.line), std::move(items));
  }
  if (is_op("{")) {
    next();
    std::vector<ExprPtr> items;
    while (!is_op("}")) {
      if (!items.empty()) expect_op(",");
      if (is_op("}")) break;
      items.push_back(parse_expression(true));
      expect_op(":");
      items.push_back(parse_expression(true));
    }
    next();
    return with(node(Ex::Dict, t.line), std::move(items));
  }
  unexpected("an expression");
}

ExprPtr Parser::postfix(ExprPtr e) {
  for (;;) {
    if (is_op(".")) {
      int line = cur().line;
      next();
      if (cur().type == Tok::Name) {
        auto g = node(Ex::Getattr, line);
        g->name = cur().text;
        next();
        std::vector<ExprPtr> v;
        v.push_back(std::move(e));
        e = with(std::move(g), std::move(v));
      } else if (cur().type == Tok::Int) {
        auto k = node(Ex::Const, line);
        k->value = Value::integer(cur().ival);
        next();
        e = binary(Ex::Getitem, line, "", std::move(e), std::move(k));
      } else {
        unexpected("a name or number after '.'");
      }
    } else if (is_op("[")) {
      int line = cur().line;
      next();
      std::vector<ExprPtr> keys;
      while (!is_op("]")) {
        if (!keys.empty()) expect_op(",");
        keys.push_back(subscribed());
      }
      next();
      if (keys.empty()) fail_at(line, "expected a subscript inside '[]'");
      ExprPtr key = keys.size() == 1 ? std::move(keys[0]) : with(node(Ex::Tuple, line), std::move(keys));
      e = binary(Ex::Getitem, line, "", std::move(e), std::move(key));
    } else if (is_op("(")) {
      e = call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::subscribed() {
  const int line = cur().line;
  ExprPtr parts[3];
  if (!is_op(":")) {
    ExprPtr e = parse_expression(true);
    if (!is_op(":")) return e;
    parts[0] = std::move(e);
  }
  next();  // the first ':'
  if (!is_op(":") && !is_op("]") && !is_op(",")) parts[1] = parse_expression(true);
  if (skip_op(":") && !is_op("]") && !is_op(",")) parts[2] = parse_expression(true);
  std::vector<ExprPtr> v;
  for (auto& x : parts) v.push_back(std::move(x));
  return with(node(Ex::Slice, line), std::move(v));
}

// (args, kwargs) into e->args (after whatever is there) and e->kwargs.
void Parser::call_args(Expr& e, std::vector<ExprPtr>& args) {
  expect_op("(");
  bool need_comma = false;
  while (!is_op(")")) {
    if (need_comma) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (is_op("*") || is_op("**")) fail_at(cur().line, "*args and **kwargs in calls are not supported");
    if (cur().type == Tok::Name && is_op(look(), "=")) {
      std::string key = cur().text;
      next();
      next();
      e.kwargs.emplace_back(key, parse_expression(true));
    } else {
      if (!e.kwargs.empty()) fail_at(cur().line, "a positional argument follows a keyword argument");
      args.push_back(parse_expression(true));
    }
    need_comma = true;
  }
  next();
}

ExprPtr Parser::call(ExprPtr callee) {
  auto e = node(Ex::Call, cur().line);
  std::vector<ExprPtr> args;
  args.push_back(std::move(callee));
  call_args(*e, args);
  return with(std::move(e), std::move(args));
}

ExprPtr Parser::filter_expr(ExprPtr e) {
  for (;;) {
    if (is_op("|")) {
      next();
      int line = cur().line;
      std::string name = expect_name();
      if (is_op(".")) fail_at(line, "dotted filter names are not supported");
      if (!known_filter(name))
        fail_at(line, "no filter named '" + name + "' (chat templates support: " + known_filters() + ")");
      auto f = node(Ex::Filter, line);
      f->name = name;
      std::vector<ExprPtr> args;
      args.push_back(std::move(e));
      if (is_op("(")) call_args(*f, args);
      e = with(std::move(f), std::move(args));
    } else if (is_name("is")) {
      int line = cur().line;
      next();
      bool negated = skip_name("not");
      std::string name = expect_name();
      if (is_op(".")) fail_at(line, "dotted test names are not supported");
      if (!known_test(name))
        fail_at(line, "no test named '" + name + "' (chat templates support: " + known_tests() + ")");
      auto test = node(Ex::Test, line);
      test->name = name;
      std::vector<ExprPtr> args;
      args.push_back(std::move(e));
      if (is_op("(")) {
        call_args(*test, args);
      } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
                  cur().type == Tok::Float || is_op("[") || is_op("{")) &&
                 !is_name("else") && !is_name("or") && !is_name("and")) {
        if (is_name("is")) fail_at(line, "tests cannot be chained with 'is'");
        args.push_back(postfix(primary()));
      }
      e = with(std::move(test), std::move(args));
      if (negated) e = unary(Ex::Not, line, std::move(e));
    } else if (is_op("(")) {
      e = call(std::move(e));
    } else {
      return e;
    }
  }
}

}  // namespace dt::io::jinja
