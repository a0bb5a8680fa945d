// libFuzzer: the option parser of dt_module_create_sequential ("layers", e.g.
// "linear:4:32,gelu,layernorm:32,linear:32:1"), through the C API as a host calls it. A
// spec it accepts builds the module; sizes it cannot hold must be refused, not allocated.
#include <string>

#include "dtrain/dtrain.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t n) {
  const std::string spec(reinterpret_cast<const char*>(data), n);
  dt_options* o = nullptr;
  if (dt_options_create(&o) != DT_OK) return 0;
  dt_module* m = nullptr;
  if (dt_options_set_string(o, "layers", spec.c_str()) == DT_OK && dt_module_create_sequential(o, &m) == DT_OK)
    dt_module_destroy(m);
  dt_options_destroy(o);
  return 0;
}
