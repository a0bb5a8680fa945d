// A Jinja interpreter for the subset of Jinja that Hugging Face chat templates use, with
// jinja2's output byte for byte as transformers configures it (trim_blocks, lstrip_blocks,
// the loopcontrols extension, and its `generation` tag). docs/models.md lists the subset.
//
// A template comes from outside (a model's tokenizer_config.json), so nothing in it may
// crash or exhaust the process: parsing bounds the nesting depth, rendering bounds the
// output, every string and list built, the number of steps, and the nesting of values. A
// construct outside the subset is refused when the template is parsed, naming it and its
// line. Every failure is DT_ERR_INVALID_ARGUMENT.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/jinja_value.h"

namespace dt::io::jinja {

struct Limits {
  size_t max_source_bytes = size_t(1) << 20;
  int max_nesting = 64;                       // tags inside tags, and expression depth
  size_t max_output_bytes = size_t(64) << 20;
  size_t max_string_bytes = size_t(64) << 20;  // any one string or list built while rendering
  uint64_t max_steps = 10'000'000;             // evaluations, loop iterations, items copied
};

// DT_ERR_INVALID_ARGUMENT: "chat template line N: what".
[[noreturn]] void fail_at(int line, const std::string& what);

struct Stmt;

struct RenderResult {
  std::string text;
  Regions regions;  // where strings carrying regions were printed
  std::vector<std::pair<size_t, size_t>> generation;  // output of each {% generation %} block
};

class Template {
 public:
  static Template parse(const std::string& source, const Limits& limits = Limits{});
  // `vars` are the template's variables (messages, bos_token, add_generation_prompt, ...);
  // the globals transformers adds (raise_exception, strftime_now, namespace, range, dict)
  // are always there.
  RenderResult render(const std::vector<std::pair<std::string, Value>>& vars) const;
  bool has_generation() const { return has_generation_; }  // any {% generation %} block

 private:
  std::shared_ptr<const std::vector<Stmt>> body_;
  Limits limits_;
  bool has_generation_ = false;
};

}  // namespace dt::io::jinja
