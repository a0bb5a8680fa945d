// libFuzzer: the dataset readers on a file of arbitrary bytes: a token file (u16 or u32,
// chosen by the first byte, with a vocabulary bound) and a text file, each read through
// every example, as a loader would.
#include <vector>

#include "fuzz/fuzz_util.h"
#include "io/dataset.h"

namespace {

void read_all(const dt::io::Dataset& d, int64_t context) {
  std::vector<int32_t> in(static_cast<size_t>(context)), out(static_cast<size_t>(context));
  for (int64_t i = 0; i < d.size() && i < 4096; ++i) d.get(i, in.data(), out.data());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t n) {
  if (n < 2) return 0;
  const int width = data[0] & 1 ? 4 : 2;
  const int64_t context = 1 + data[1] % 64;
  const int64_t vocab = (data[0] & 2) ? 300 : 0;  // 0: no bound but the format's
  dt::fuzz::MemFile f(data + 2, n - 2);
  if (!f.ok()) return 0;
  dt::fuzz::expect_clean([&] { read_all(*dt::io::TokenDataset::from_token_file(f.path(), width, context, vocab), context); });
  dt::fuzz::expect_clean([&] { read_all(*dt::io::TokenDataset::from_text_file(f.path(), context), context); });
  return 0;
}
