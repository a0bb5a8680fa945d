// The layer-list language of dt_module_create_sequential, e.g. "linear:4:32,gelu,linear:32:1":
// parsed and checked whole (syntax and sizes) before anything is built, so that a refused
// list allocates nothing; the caller may check the memory its parameters need in between.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nn/sequential.h"

namespace dt::nn {

// One parsed layer of the list.
struct LayerSpec {
  std::string kind;  // linear, gelu, silu, layernorm, rmsnorm
  int64_t in = 0, out = 0;
  bool bias = true;
  double params() const {
    if (kind == "linear") return double(in) * double(out) + (bias ? double(out) : 0.0);
    if (kind == "layernorm") return 2.0 * double(in);  // gain and bias
    return kind == "rmsnorm" ? double(in) : 0.0;
  }
};

// The grammar, for messages: "accepted: comma-separated layers ...".
const char* layer_spec_grammar();
// INVALID_ARGUMENT naming the option "layers", the layer at fault and the grammar.
std::vector<LayerSpec> parse_layer_spec(const std::string& spec);
// The module of a parsed list (spec: the text, for the error when it has no linear or
// norm layer); each layer's parameters drawn from `seed` with `init_std`.
std::shared_ptr<Sequential> build_sequential(const std::vector<LayerSpec>& layers, const std::string& spec,
                                             uint64_t seed, float init_std);

}  // namespace dt::nn
