// A Hugging Face model directory (io/hf_model.h), timed against anchors of the same run:
//  - load: the weights mapped and converted into a built model (hf_load_weights), against
//    reading the same files' bytes from the page cache with read() into one buffer (both
//    warm: the files were read once before). Goal: >= 0.7 of the read rate.
//  - decode: batch-1 greedy decoding (tokens/s = 1 / inter-token latency) against the
//    memory-bandwidth bound (memcpy's rate, read + write bytes, over the weight bytes).
// Usage: bench_hf DIR [--precision f32|bf16|stored] [--new-tokens N] [--quick] [--json FILE]
// tools/hf_real_sized.sh makes a SmolLM2-135M-shaped directory to run it on.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "common/anchors.h"
#include "common/bench_util.h"
#include "core/thread_pool.h"
#include "engine/generate.h"
#include "io/hf_model.h"

using namespace dt;
using namespace dt::bench;

namespace {

// Reads every file whole into `buf` (reused); the bytes read.
double read_all(const std::vector<std::string>& files, std::vector<char>& buf) {
  double total = 0;
  for (const std::string& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY);
    if (fd < 0) throw std::runtime_error("cannot open " + f);
    ssize_t n;
    while ((n = ::read(fd, buf.data(), buf.size())) > 0) total += static_cast<double>(n);
    ::close(fd);
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage =
      "bench_hf DIR [--precision f32|bf16|stored] [--new-tokens N] [--quick] [--json FILE]\n"
      "  Load time of a Hugging Face directory vs reading its bytes from the page cache;\n"
      "  batch-1 decode vs the memory-bandwidth bound.";
  std::string dir;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] != '-' && dir.empty() && (i == 1 || std::string(argv[i - 1]).rfind("--", 0) != 0 ||
                                            std::string(argv[i - 1]) == "--quick"))
      dir = argv[i];
    else
      rest.push_back(argv[i]);
  }
  const Options opt = parse_args(static_cast<int>(rest.size()), rest.data(), usage, {"precision", "new-tokens"});
  if (dir.empty()) {
    std::fprintf(stderr, "bench_hf: a model directory is required\n%s\n", usage.c_str());
    return 2;
  }
  Report report("bench_hf");
  report.meta().str("dir", dir).str("load_average", load_average());
  try {
    const io::HfModelDir d = io::hf_open(dir);
    nn::GPTConfig c = d.config.gpt;
    const std::string precision = option_value(opt, "precision", "f32");
    if (precision == "bf16") c.dtype = DType::BF16;
    else if (precision == "f32") c.dtype = DType::F32;
    else if (precision != "stored") throw std::runtime_error("--precision " + precision + "; accepted: f32, bf16, stored");
    std::printf("%s: %s, %.1fM parameters, %.1f MB in %zu file(s); model in %s\n", dir.c_str(),
                d.config.architecture.c_str(), static_cast<double>(c.param_count()) / 1e6, d.weight_bytes / 1e6,
                d.files.size(), dtype_name(c.dtype));
    // Load against the page-cache read.
    std::vector<char> buf(size_t{16} << 20);
    read_all(d.files, buf);  // warm the page cache
    nn::GPT model(c);        // built (and first touched) once; each load converts into it
    const Budget budget{opt.quick ? 1.0 : 4.0, opt.quick ? 2 : 3, 20};
    progress("load", 1, 2, "read() vs hf_load_weights");
    const std::vector<Stats> st =
        time_interleaved({[&] { read_all(d.files, buf); }, [&] { io::hf_load_weights(d, model); }}, budget);
    const double read_gbps = d.weight_bytes / st[0].median_s / 1e9, load_gbps = d.weight_bytes / st[1].median_s / 1e9;
    std::printf("load: %.3f s (%.2f GB/s of files) vs read() from the page cache %.3f s (%.2f GB/s): %.2fx the read "
                "rate (goal >= 0.7)\n",
                st[1].median_s, load_gbps, st[0].median_s, read_gbps, st[0].median_s / st[1].median_s);
    report.add("load", "hf_load_weights").num("seconds", st[1].median_s).num("read_seconds", st[0].median_s)
        .num("bytes", static_cast<double>(d.weight_bytes)).num("ratio_to_read", st[0].median_s / st[1].median_s);
    // Batch-1 decode against the bandwidth bound.
    progress("decode", 2, 2, "batch 1 greedy");
    engine::GenerateOptions go;
    go.max_new_tokens = std::stoll(option_value(opt, "new-tokens", opt.quick ? "16" : "64"));
    const std::vector<std::vector<int32_t>> prompt = {std::vector<int32_t>(16, 1)};
    std::vector<double> itl;
    for (int i = 0; i <= (opt.quick ? 1 : 3); ++i) {
      const engine::GenerateResult r = engine::generate(model, prompt, go);
      if (i > 0) itl.push_back(r.stats.inter_token_latency_s);
    }
    const double param_bytes = static_cast<double>(c.param_count()) * static_cast<double>(dtype_size(c.dtype));
    const int threads = kernel_pool().size();
    const std::vector<CopyBandwidth> bw = measure_copy_bandwidth(size_t{256} << 20, {threads}, opt.quick);
    const double got = 1.0 / median(itl), bound = bw.at(0).median_gbps * 1e9 / param_bytes;
    std::printf("decode, batch 1: %.1f tokens/s (inter-token latency %.1f ms) vs the bandwidth bound %.1f tokens/s "
                "(memcpy %.1f GB/s over %.1f MB of weights): %.2f of the bound\n",
                got, 1e3 * median(itl), bound, bw[0].median_gbps, param_bytes / 1e6, got / bound);
    report.add("decode", "batch1").num("tokens_per_s", got).num("bound_tokens_per_s", bound)
        .num("memcpy_gbps", bw[0].median_gbps).num("param_bytes", param_bytes).num("fraction_of_bound", got / bound);
  } catch (const std::exception& e) {
    std::printf("failed: %s\n", e.what());
    report.note("hf", "failed", e.what());
    if (!opt.json_path.empty()) report.write(opt.json_path);
    return 1;
  }
  if (!opt.json_path.empty() && !report.write(opt.json_path)) return 1;
  return 0;
}
