// Hugging Face tokenizer.json tokenizers (io/hf_tokenizer.h), single-threaded: encoding the
// 1 MB of generated text of the tokenizer test (tests/unit/hf_text_gen.h: code, whitespace
// runs, digits, CJK, Arabic, emoji, combining marks, made-up words) with each fixture family
// of tests/fixtures/hf/tokenizers, as one string. Prints MB/s and tokens/s per family, and the
// decode speed; bench/compare_tokenizers.py runs this and the `tokenizers` package on the same
// text and prints the ratio.
//
//   bench_tokenizer [--quick] [--filter FAMILY] [--json PATH] [--fixtures DIR]
#include <cstdio>

#include "common/bench_util.h"
#include "io/hf_tokenizer.h"
#include "tests/unit/hf_text_gen.h"

using namespace dt;
using namespace dt::bench;

int main(int argc, char** argv) {
  const Options opt = parse_args(argc, argv,
                                 "bench_tokenizer [--quick] [--filter FAMILY] [--json PATH] [--fixtures DIR]\n"
                                 "  encodes 1 MB of generated text with each tokenizer fixture, one thread",
                                 {"fixtures"});
  // By default the fixtures of the source tree this file was compiled from.
  const std::string here = __FILE__;
  const std::string root = here.substr(0, here.rfind("/bench/"));
  const std::string dir = option_value(opt, "fixtures", root + "/tests/fixtures/hf/tokenizers");
  const auto cats = test::hfgen::load_fragments(dir + "/fragments.json");
  // The test's text: seed 20260101, 64 chunks of at least 16 kB (make_tokenizers.py).
  std::string text;
  for (const std::string& c : test::hfgen::chunks(cats, 20260101, opt.quick ? 8 : 64, 16384)) text += c;
  const double mb = static_cast<double>(text.size()) / 1e6;

  Report report("bench_tokenizer");
  report.meta().num("text_bytes", static_cast<double>(text.size())).str("load_average", load_average());
  std::printf("bench_tokenizer: %.2f MB of generated text, one thread, load %s\n", mb, load_average().c_str());
  std::printf("%-8s %10s %12s %14s %12s\n", "family", "tokens", "encode MB/s", "encode tok/s", "decode MB/s");
  const char* families[] = {"gpt2", "llama3", "qwen2", "llama2", "mistral"};
  Budget budget;
  budget.seconds = opt.quick ? 0.3 : 2.0;
  budget.min_reps = opt.quick ? 2 : 5;
  for (const char* f : families) {
    if (!selected(opt, f)) continue;
    const io::HfTokenizer tok = io::HfTokenizer::load(dir + "/" + f + "/tokenizer.json");
    std::vector<int32_t> ids;
    const Stats enc = time_one([&] { ids = tok.encode(text, false); }, budget);
    std::string back;
    const Stats dec = time_one([&] { back = tok.decode(ids); }, budget);
    const double tokens = static_cast<double>(ids.size());
    std::printf("%-8s %10.0f %12.2f %14.0f %12.2f\n", f, tokens, mb / enc.median_s, tokens / enc.median_s,
                static_cast<double>(back.size()) / 1e6 / dec.median_s);
    report.add("encode", f)
        .num("tokens", tokens)
        .num("encode_median_s", enc.median_s)
        .num("encode_mb_per_s", mb / enc.median_s)
        .num("encode_tokens_per_s", tokens / enc.median_s)
        .num("decode_median_s", dec.median_s)
        .num("reps", enc.reps);
  }
  if (!opt.json_path.empty() && !report.write(opt.json_path)) return 1;
  return 0;
}
