// libFuzzer: the option parser of dt_module_create_sequential ("layers", e.g.
// "linear:4:32,gelu,layernorm:32,linear:32:1"), through the C API as a host calls it. A
// spec it accepts builds the module; sizes past its range or this machine's memory must be
// refused (a unit test covers those refusals), never allocated.
#include <cstdint>
#include <string>

#include "dtrain/dtrain.h"

namespace {

// Specs the library would rightly build but that need more than the fuzzer's memory limit
// (-malloc_limit_mb, -rss_limit_mb) are not run: sizes above 1024 or more than 64 of them
// (at most 32 linear layers of 1024 x 1024: 256 MiB with gradients).
bool fits_the_fuzzer(const std::string& spec) {
  int numbers = 0;
  uint64_t value = 0;
  bool in_number = false;
  for (char ch : spec) {
    if (ch >= '0' && ch <= '9') {
      value = in_number ? value * 10 + uint64_t(ch - '0') : uint64_t(ch - '0');
      if (!in_number) ++numbers;
      in_number = true;
      if (value > 1024) return false;
    } else {
      in_number = false;
    }
  }
  return numbers <= 64;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t n) {
  const std::string spec(reinterpret_cast<const char*>(data), n);
  if (!fits_the_fuzzer(spec)) return 0;
  dt_options* o = nullptr;
  if (dt_options_create(&o) != DT_OK) return 0;
  dt_module* m = nullptr;
  if (dt_options_set_string(o, "layers", spec.c_str()) == DT_OK && dt_module_create_sequential(o, &m) == DT_OK)
    dt_module_destroy(m);
  dt_options_destroy(o);
  return 0;
}
