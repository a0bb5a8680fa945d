// The model flags that `dtrain train` shares with anything else that builds a GPT: a preset
// and the fields that override it, turned into dt_module_create_gpt options.
#pragma once
#include <CLI/CLI.hpp>

#include "cli.h"

namespace dtcli {

struct ModelArgs {
  std::string preset = "gpt-tiny";
  int64_t layers = -1, d_model = -1, heads = -1, kv_heads = -1, d_ff = -1, vocab = -1;  // -1: not given
  std::string norm, pos, act, precision, device;

  void add_to(CLI::App& app);
  // The module, with `context` as its longest sequence and `seed` for its initial weights.
  Module create(int64_t context, int64_t seed) const;
};

}  // namespace dtcli
