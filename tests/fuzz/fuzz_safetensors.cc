// libFuzzer: the safetensors header parser on whole files. A header it accepts must describe
// tensors that lie inside the file: every byte of each is read, so ASan checks the claim.
#include "fuzz/fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t n) {
  dt::fuzz::expect_clean([&] {
    dt::io::StHeader h = dt::io::st_parse_header("fuzz.safetensors", data, n);
    unsigned sum = 0;
    for (const dt::io::StEntry& e : h.entries)
      for (uint64_t b = e.begin; b < e.end; ++b) sum += data[h.data_start + b];
    if (sum == 0xdeadbeef) __builtin_trap();  // keeps the reads from being optimized away
  });
  return 0;
}
