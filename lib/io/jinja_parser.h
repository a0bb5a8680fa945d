// Inside the Jinja parser: its state and helpers, shared by jinja_parser.cc (statements)
// and jinja_parse_expr.cc (expressions). It follows jinja2's grammar and precedence
// (condexpr < or < and < not < comparisons < + - < ~ < * / // % < ** < unary < postfix,
// filters and tests); unsupported tags, filters and tests are refused by name.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "io/jinja_eval.h"
#include "io/jinja_lexer.h"

namespace dt::io::jinja {

// Deeper expressions are refused: evaluation recurses once per level.
constexpr int kMaxExprDepth = 200;

class Parser {
 public:
  Parser(std::vector<Token> tokens, const Limits& limits) : t_(std::move(tokens)), limits_(limits) {}

  std::vector<Stmt> parse_all() {
    std::string end;
    return subparse({}, &end, 1);
  }

 private:
  std::vector<Token> t_;
  size_t p_ = 0;
  const Limits& limits_;
  int nesting_ = 0;     // tags inside tags, and recursive descent
  int loop_depth_ = 0;  // for break / continue

  const Token& cur() const { return t_[p_]; }
  const Token& look(size_t k = 1) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  void next() {
    if (p_ + 1 < t_.size()) ++p_;
  }
  bool is_op(const Token& t, const char* op) const { return t.type == Tok::Op && t.text == op; }
  bool is_op(const char* op) const { return is_op(cur(), op); }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::Data: return "template text";
      case Tok::VarBegin: return "'{{'";
      case Tok::VarEnd: return "end of expression tag '}}'";
      case Tok::BlockBegin: return "'{%'";
      case Tok::BlockEnd: return "end of block tag '%}'";
      case Tok::Name: return "'" + t.text + "'";
      case Tok::String: return "string literal";
      case Tok::Int:
      case Tok::Float: return "number";
      case Tok::Op: return "'" + t.text + "'";
      case Tok::Eof: return "end of template";
    }
    return "token";
  }
  [[noreturn]] void unexpected(const std::string& wanted) const {
    fail_at(cur().line, "expected " + wanted + ", got " + describe(cur()));
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) unexpected(std::string("'") + op + "'");
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) unexpected("a name");
    std::string n = cur().text;
    next();
    return n;
  }
  // The end of a tag that opens a body; jinja2 allows a colon before it ("{% if x: %}").
  void expect_body_start() {
    skip_op(":");
    expect_block_end();
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) unexpected("end of block tag '%}'");
    next();
  }

  struct Nest {
    Parser& p;
    Nest(Parser& parser, int line) : p(parser) {
      if (++p.nesting_ > p.limits_.max_nesting)
        fail_at(line, "nested deeper than " + std::to_string(p.limits_.max_nesting) + " levels");
    }
    ~Nest() { --p.nesting_; }
  };

  ExprPtr node(Ex kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  ExprPtr with(ExprPtr e, std::vector<ExprPtr> args) {
    int d = 0;
    for (const auto& a : args)
      if (a) d = std::max(d, a->depth);
    for (const auto& kv : e->kwargs) d = std::max(d, kv.second->depth);
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth)
      fail_at(e->line, "an expression nested deeper than " + std::to_string(kMaxExprDepth) + " levels");
    e->args = std::move(args);
    return e;
  }
  ExprPtr unary(Ex kind, int line, ExprPtr a) {
    std::vector<ExprPtr> v;
    v.push_back(std::move(a));
    return with(node(kind, line), std::move(v));
  }
  ExprPtr binary(Ex kind, int line, const std::string& name, ExprPtr a, ExprPtr b) {
    auto e = node(kind, line);
    e->name = name;
    std::vector<ExprPtr> v;
    v.push_back(std::move(a));
    v.push_back(std::move(b));
    return with(std::move(e), std::move(v));
  }

  // ---------------------------------------------------------------- statements

  // Parses until a block tag named in `ends` (its name is consumed and stored in *which),
  // or the end of the template when `ends` is empty.
  std::vector<Stmt> subparse(std::vector<const char*> ends, std::string* which, int open_line);

  Stmt statement();

  Target assign_target(bool with_namespace, const std::vector<const char*>& extra_end);

  Stmt parse_for();

  Stmt parse_if();

  Stmt parse_set();

  // ---------------------------------------------------------------- expressions

  bool tuple_end(const std::vector<const char*>& extra) const;

  ExprPtr parse_tuple(bool simplified, bool with_condexpr, const std::vector<const char*>& extra, bool parens);

  ExprPtr parse_expression(bool with_condexpr);

  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);

  ExprPtr primary();

  ExprPtr postfix(ExprPtr e);

  ExprPtr subscribed();

  // (args, kwargs) into e->args (after whatever is there) and e->kwargs.
  void call_args(Expr& e, std::vector<ExprPtr>& args);

  ExprPtr call(ExprPtr callee);

  ExprPtr filter_expr(ExprPtr e);
};

}  // namespace dt::io::jinja
