// The Jinja parser, statements: template text, {{ }}, and the tags chat templates use
// (for, if, set, print, break, continue, generation). Expressions: jinja_parse_expr.cc.
#include "io/jinja_parser.h"

namespace dt::io::jinja {

// Parses until a block tag named in `ends` (its name is consumed and stored in *which),
// or the end of the template when `ends` is empty.
std::vector<Stmt> Parser::subparse(std::vector<const char*> ends, std::string* which, int open_line) {
  std::vector<Stmt> body;
  for (;;) {
    const Token& t = cur();
    if (t.type == Tok::Eof) {
      if (ends.empty()) return body;
      std::string list;
      for (const char* e : ends) list += std::string(list.empty() ? "" : " or ") + "'" + e + "'";
      fail_at(open_line, "this tag is never closed: the template ends before " + list);
    }
    if (t.type == Tok::Data) {
      Stmt s{St::Text, t.line};
      s.text = t.text;
      body.push_back(std::move(s));
      next();
    } else if (t.type == Tok::VarBegin) {
      next();
      Stmt s{St::Print, t.line};
      s.expr = parse_tuple(false, true, {}, false);
      if (cur().type != Tok::VarEnd) unexpected("end of expression tag '}}'");
      next();
      body.push_back(std::move(s));
    } else if (t.type == Tok::BlockBegin) {
      next();
      if (cur().type != Tok::Name) unexpected("a tag name");
      for (const char* e : ends)
        if (cur().text == e) {
          *which = e;
          next();
          return body;
        }
      body.push_back(statement());
    } else {
      unexpected("template text or a tag");
    }
  }
}

Stmt Parser::statement() {
  const Token tag = cur();
  Nest nest(*this, tag.line);
  const std::string& n = tag.text;
  if (n == "for") return parse_for();
  if (n == "if") return parse_if();
  if (n == "set") return parse_set();
  if (n == "print") {
    next();
    Stmt s{St::Print, tag.line};
    s.expr = parse_tuple(false, true, {}, false);
    expect_block_end();
    return s;
  }
  if (n == "break" || n == "continue") {
    if (loop_depth_ == 0) fail_at(tag.line, "'" + n + "' outside a for loop");
    next();
    expect_block_end();
    return Stmt{n == "break" ? St::Break : St::Continue, tag.line};
  }
  if (n == "generation") {
    next();
    expect_body_start();
    Stmt s{St::Generation, tag.line};
    std::string end;
    s.body = subparse({"endgeneration"}, &end, tag.line);
    expect_block_end();
    return s;
  }
  static const char* const unsupported[] = {"macro", "call", "filter", "include", "import", "from", "extends",
                                            "block", "raw", "with", "autoescape", "do", "trans"};
  for (const char* u : unsupported)
    if (n == u)
      fail_at(tag.line, "the {% " + n + " %} tag is not supported in chat templates (supported: for, if, set, "
                        "print, break, continue, generation)");
  if (n.compare(0, 3, "end") == 0 || n == "elif" || n == "else")
    fail_at(tag.line, "unexpected {% " + n + " %}: no open tag takes it here");
  fail_at(tag.line, "unknown tag '" + n + "'");
}

Target Parser::assign_target(bool with_namespace, const std::vector<const char*>& extra_end) {
  Target target;
  const int line = cur().line;
  if (with_namespace && cur().type == Tok::Name && is_op(look(), ".")) {
    target.names.push_back(expect_name());
    next();
    target.attr = expect_name();
    return target;
  }
  for (;;) {
    if (cur().type != Tok::Name) unexpected("a variable name to assign to");
    const std::string& n = cur().text;
    if (n == "true" || n == "false" || n == "none" || n == "True" || n == "False" || n == "None")
      fail_at(line, "cannot assign to '" + n + "'");
    target.names.push_back(n);
    next();
    if (!is_op(",")) break;
    target.unpack = true;
    next();
    bool end = cur().type == Tok::BlockEnd || is_op("=");
    for (const char* e : extra_end) end = end || is_name(e);
    if (end) break;
  }
  return target;
}

Stmt Parser::parse_for() {
  Stmt s{St::For, cur().line};
  next();
  s.target = assign_target(false, {"in"});
  if (!skip_name("in")) unexpected("'in'");
  s.expr = parse_tuple(false, false, {"recursive"}, false);
  if (skip_name("if")) s.filter = parse_expression(true);
  if (is_name("recursive")) fail_at(cur().line, "recursive for loops are not supported in chat templates");
  expect_body_start();
  std::string end;
  ++loop_depth_;
  s.body = subparse({"endfor", "else"}, &end, s.line);
  --loop_depth_;
  if (end == "else") {
    expect_body_start();
    s.else_body = subparse({"endfor"}, &end, s.line);
  }
  expect_block_end();
  return s;
}

Stmt Parser::parse_if() {
  Stmt s{St::If, cur().line};
  next();
  for (;;) {
    ExprPtr cond = parse_tuple(false, false, {}, false);
    expect_body_start();
    std::string end;
    std::vector<Stmt> body = subparse({"elif", "else", "endif"}, &end, s.line);
    s.branches.emplace_back(std::move(cond), std::move(body));
    if (end == "elif") continue;
    if (end == "else") {
      expect_body_start();
      s.branches.emplace_back(nullptr, subparse({"endif"}, &end, s.line));
    }
    break;
  }
  expect_block_end();
  return s;
}

Stmt Parser::parse_set() {
  Stmt s{St::Set, cur().line};
  next();
  s.target = assign_target(true, {});
  if (skip_op("=")) {
    s.expr = parse_tuple(false, true, {}, false);
    expect_block_end();
    return s;
  }
  if (is_op("|")) fail_at(cur().line, "filters on a {% set %} block are not supported in chat templates");
  if (s.target.unpack) unexpected("'='");
  expect_body_start();
  s.kind = St::SetBlock;
  std::string end;
  s.body = subparse({"endset"}, &end, s.line);
  expect_block_end();
  return s;
}

std::vector<Stmt> parse_template(const std::string& source, const Limits& limits) {
  if (source.size() > limits.max_source_bytes)
    fail_at(1, "the template has " + std::to_string(source.size()) + " bytes; the limit is " +
                   std::to_string(limits.max_source_bytes));
  if (!utf8_valid(source)) fail_at(1, "the template is not valid UTF-8");
  return Parser(lex(source), limits).parse_all();
}

}  // namespace dt::io::jinja
