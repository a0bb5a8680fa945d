#include "nn/sequential_spec.h"

#include <sstream>

#include "core/error.h"

namespace dt::nn {
namespace {

const char* kLayerHelp =
    "accepted: comma-separated layers \"linear:IN:OUT\", \"linear:IN:OUT:nobias\", \"gelu\", \"silu\", "
    "\"layernorm:DIM\", \"rmsnorm:DIM\", e.g. \"linear:4:32,gelu,linear:32:1\"";

// Most features one size field may name: 2^31, so that IN x OUT cannot overflow int64.
constexpr int64_t kMaxFeatures = int64_t(1) << 31;

int64_t size_field(const std::vector<std::string>& f, size_t i, const std::string& layer) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(f.at(i), &used);
  } catch (const std::exception&) {
    used = 0;
  }
  DT_CHECK(used > 0 && used == f[i].size() && v >= 1 && v <= kMaxFeatures,
           "option \"layers\": \"" + layer + "\" needs sizes from 1 to " + std::to_string(kMaxFeatures) + "; " +
               kLayerHelp);
  return v;
}

}  // namespace

const char* layer_spec_grammar() { return kLayerHelp; }

std::vector<LayerSpec> parse_layer_spec(const std::string& spec) {
  std::vector<LayerSpec> layers;
  std::stringstream all(spec);
  std::string layer;
  while (std::getline(all, layer, ',')) {
    std::vector<std::string> f;
    std::stringstream parts(layer);
    for (std::string x; std::getline(parts, x, ':');) f.push_back(x);
    const std::string kind = f.empty() ? "" : f[0];
    if (kind == "linear" && (f.size() == 3 || (f.size() == 4 && f[3] == "nobias")))
      layers.push_back({kind, size_field(f, 1, layer), size_field(f, 2, layer), f.size() == 3});
    else if ((kind == "gelu" || kind == "silu") && f.size() == 1)
      layers.push_back({kind});
    else if ((kind == "layernorm" || kind == "rmsnorm") && f.size() == 2)
      layers.push_back({kind, size_field(f, 1, layer)});
    else
      invalid("option \"layers\": \"" + layer + "\" is not a layer; " + kLayerHelp);
  }
  return layers;
}

std::shared_ptr<Sequential> build_sequential(const std::vector<LayerSpec>& layers, const std::string& spec,
                                             uint64_t seed, float init_std) {
  auto seq = std::make_shared<Sequential>(seed, init_std);
  for (const LayerSpec& l : layers) {
    if (l.kind == "linear")
      seq->add_linear(l.in, l.out, l.bias);
    else if (l.kind == "gelu" || l.kind == "silu")
      seq->add_activation(l.kind == "gelu" ? MLPAct::GELU : MLPAct::SiLU);
    else
      seq->add_norm(l.kind == "layernorm" ? NormKind::LayerNorm : NormKind::RMSNorm, l.in);
  }
  DT_CHECK(seq->out_features() > 0, "option \"layers\" = \"" + spec + "\" has no linear or norm layer; " + kLayerHelp);
  return seq;
}

}  // namespace dt::nn
