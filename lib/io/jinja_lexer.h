// The Jinja lexer: template text to tokens, with jinja2's whitespace rules as transformers
// sets them (trim_blocks: the first newline after a block or comment tag goes; lstrip_blocks:
// spaces and tabs from the start of a line up to a block or comment tag go; `-` strips all
// whitespace on that side, `+` keeps it; one trailing newline of the template goes).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dt::io::jinja {

enum class Tok { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type;
  std::string text;  // Data, Name, String (decoded), Op
  int64_t ival = 0;
  double fval = 0;
  int line = 1;
};

std::vector<Token> lex(const std::string& source);

}  // namespace dt::io::jinja
