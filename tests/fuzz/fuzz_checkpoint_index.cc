// libFuzzer: a checkpoint index (JSON) and the model config inside it, as
// dt_module_create_from_checkpoint reads them: parse and validate the index, rebuild the
// config, estimate its size and compare it with a model's. Must never build the model.
#include "fuzz/fuzz_util.h"
#include "io/checkpoint.h"
#include "io/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t n) {
  dt::fuzz::expect_clean([&] {
    const nlohmann::json idx = dt::io::parse_checkpoint_index("fuzz.index.json", reinterpret_cast<const char*>(data), n);
    const nlohmann::json& meta = idx["metadata"];
    if (!meta.contains("config")) return;
    const dt::nn::GPTConfig c = dt::io::config_from_json(meta["config"], "fuzz.index.json");
    volatile double bytes = dt::io::config_min_checkpoint_bytes(c);
    (void)bytes;
    (void)dt::io::config_mismatch(meta["config"], dt::nn::GPTConfig{});
  });
  return 0;
}
