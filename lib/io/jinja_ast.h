// The syntax tree of a parsed Jinja template (lib/io/jinja.h).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/jinja_value.h"

namespace dt::io::jinja {

enum class Ex {
  Const,    // value
  Name,     // name
  List,     // args: items
  Tuple,    // args: items
  Dict,     // args: key, value, key, value, ...
  Getattr,  // args[0].name
  Getitem,  // args[0][args[1]]
  Slice,    // args: start, stop, step (each may be null)
  Call,     // args[0](args[1..], kwargs)
  Filter,   // args[0] | name(args[1..], kwargs)
  Test,     // args[0] is name(args[1..], kwargs)
  Not,
  Neg,
  Pos,
  And,
  Or,
  Compare,  // args[0] ops[0] args[1] ops[1] args[2] ...
  Binary,   // args[0] name args[1], name one of + - * / // % **
  Concat,   // args joined by ~
  Cond,     // args[0] if args[1] else args[2] (args[2] may be null)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  Ex kind;
  int line = 0;
  int depth = 1;
  Value value;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

enum class St { Text, Print, If, For, Set, SetBlock, Break, Continue, Generation };

// An assignment target: one name, names to unpack a sequence into, or a namespace attribute.
struct Target {
  std::vector<std::string> names;
  bool unpack = false;
  std::string attr;  // non-empty: names[0].attr, names[0] being a namespace()
};

struct Stmt {
  Stmt(St k, int l) : kind(k), line(l) {}
  St kind;
  int line = 0;
  std::string text;  // Text
  ExprPtr expr;      // Print; For: the iterable; Set: the value
  ExprPtr filter;    // For: the `if` that filters items
  Target target;     // For, Set, SetBlock
  std::vector<std::pair<ExprPtr, std::vector<Stmt>>> branches;  // If; a null condition is `else`
  std::vector<Stmt> body, else_body;                             // For, SetBlock, Generation
};

}  // namespace dt::io::jinja
