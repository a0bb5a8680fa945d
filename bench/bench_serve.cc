// bench_serve: the serving engine under load, in process (a load generator with Poisson
// arrivals driving serve::ServingEngine on one rank), each figure against an anchor
// measured in the same run on the same requests:
//   continuous vs static   a mixed-length workload (prompts uniform in [P/4, P], outputs
//                          exponential with mean O/4, clamped to [8, O]; arriving at --rate,
//                          default all at once) served by continuous batching, and by static
//                          batching (same kernels and cache; a batch of max_num_seqs runs to
//                          completion before the next is admitted): generated tokens/s and
//                          its ratio, TTFT and inter-token latency p50/p90/p99, preemptions
//   prefix caching         prompts whose first half is one shared prefix, 8 output tokens,
//                          Poisson arrivals at --prefix-rate: TTFT with the prefix cache and
//                          without, and the prompt positions it found
//   KV memory              the paged cache's peak use against a contiguous cache of the
//                          context for each request running at that peak
// With --url http://HOST:PORT it loads a running `dtrain serve` instead (serve/http_load.h).
// Exits 0 whatever the figures (DESIGN.md section 7).
//   bench_serve [--url URL] [--model gpt-small] [--requests N] [--rate R] [--prefix-rate R] [--prompt P] [--output O]
//               [--max-num-seqs S] [--block-size B] [--seed N] [--slow-connections K] [--quick] [--json PATH]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include "common/bench_util.h"
#include "core/thread_pool.h"
#include "serve/engine.h"
#include "serve/http_load.h"

namespace dt::bench {
namespace {

struct Req {
  double arrival_s;
  std::vector<int32_t> prompt;
  int64_t max_tokens;
};

struct Run {
  double makespan_s = 0, tokens_per_s = 0;
  int64_t tokens = 0, preemptions = 0, peak_blocks = 0, peak_running = 0, prefix_hits = 0, bytes_per_block = 0;
  serve::Histogram ttft{serve::latency_buckets()}, itl{serve::latency_buckets()};
};

// Poisson arrivals at `rate` per second (0: all at once); prompt lengths uniform in
// [plo, phi]; output lengths exponential with mean omean, clamped to [olo, ohi] (a long
// tail, as chat outputs have; omean 0: always ohi).
std::vector<Req> workload(int n, double rate, int64_t plo, int64_t phi, int64_t olo, int64_t ohi, double omean,
                          int64_t shared, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate > 0 ? rate : 1.0), out(omean > 0 ? 1.0 / omean : 1.0);
  std::vector<int32_t> prefix(static_cast<size_t>(shared));
  for (auto& t : prefix) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  std::vector<Req> w;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    if (rate > 0) t += gap(rng);
    const int64_t o = omean > 0 ? std::clamp(static_cast<int64_t>(out(rng)), olo, ohi) : ohi;
    Req r{t, prefix, o};
    const int64_t len = plo + static_cast<int64_t>(rng() % static_cast<uint64_t>(phi - plo + 1));
    while (static_cast<int64_t>(r.prompt.size()) < len) r.prompt.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab)));
    w.push_back(std::move(r));
  }
  return w;
}

// Serves the requests as they arrive; latencies from each request's scheduled arrival.
Run drive(const nn::GPTConfig& cfg, nn::GPT& model, const serve::EngineConfig& ec, const std::vector<Req>& w,
          const std::string& what) {
  serve::ServingEngine e(serve::single_model_runner(model), ec);
  Run r;
  r.bytes_per_block = e.kv_bytes_per_block();
  const size_t n = w.size();
  std::vector<double> last(n, -1);
  std::vector<serve::Event> ev;
  size_t next = 0, done = 0;
  int shown = -1;
  const double t0 = now_s();
  while (done < n) {
    const double t = now_s() - t0;
    for (; next < n && w[next].arrival_s <= t; ++next) {
      serve::SamplingParams p;
      p.max_tokens = w[next].max_tokens;
      e.add(static_cast<int64_t>(next), w[next].prompt, p, ev);
    }
    if (e.idle()) {
      if (next < n) std::this_thread::sleep_for(std::chrono::duration<double>(w[next].arrival_s - t));
      continue;
    }
    e.step(ev);
    r.peak_running = std::max(r.peak_running, e.scheduler(0).stats().running);
    const double now = now_s() - t0;
    for (const serve::Event& x : ev) {
      const size_t i = static_cast<size_t>(x.id);
      if (x.token >= 0) {
        (last[i] < 0 ? r.ttft : r.itl).observe(now - (last[i] < 0 ? w[i].arrival_s : last[i]));
        last[i] = now;
        ++r.tokens;
      }
      if (x.done) ++done;
    }
    ev.clear();
    const int tenth = static_cast<int>(10 * done / n);
    if (tenth != shown) progress(what, tenth, 10, std::to_string(done) + " of " + std::to_string(n) + " requests done");
    shown = tenth;
  }
  r.makespan_s = now_s() - t0;
  r.tokens_per_s = static_cast<double>(r.tokens) / r.makespan_s;
  const nlohmann::json st = e.stats_json();
  r.preemptions = st["preemptions"];
  r.peak_blocks = st["kv_cache"]["peak_used_blocks"];
  r.prefix_hits = st["kv_cache"]["prefix_hit_tokens"];
  (void)cfg;
  return r;
}

void print_run(const char* name, const Run& r) {
  std::printf("  %-22s %7.1f tokens/s  TTFT p50 %7.1f p90 %7.1f p99 %7.1f ms  ITL p50 %6.1f p90 %6.1f p99 %6.1f ms  "
              "preemptions %lld\n",
              name, r.tokens_per_s, 1e3 * r.ttft.quantile(0.5), 1e3 * r.ttft.quantile(0.9), 1e3 * r.ttft.quantile(0.99),
              1e3 * r.itl.quantile(0.5), 1e3 * r.itl.quantile(0.9), 1e3 * r.itl.quantile(0.99),
              static_cast<long long>(r.preemptions));
}

void record(Report& rep, const std::string& section, const std::string& name, const Run& r) {
  rep.add(section, name)
      .num("tokens_per_s", r.tokens_per_s)
      .num("makespan_s", r.makespan_s)
      .num("generated_tokens", static_cast<double>(r.tokens))
      .num("ttft_p50_s", r.ttft.quantile(0.5))
      .num("ttft_p90_s", r.ttft.quantile(0.9))
      .num("ttft_p99_s", r.ttft.quantile(0.99))
      .num("itl_p50_s", r.itl.quantile(0.5))
      .num("itl_p90_s", r.itl.quantile(0.9))
      .num("itl_p99_s", r.itl.quantile(0.99))
      .num("preemptions", static_cast<double>(r.preemptions))
      .num("peak_kv_blocks", static_cast<double>(r.peak_blocks))
      .num("peak_running", static_cast<double>(r.peak_running))
      .num("prefix_hit_tokens", static_cast<double>(r.prefix_hits));
}

}  // namespace
}  // namespace dt::bench

int main(int argc, char** argv) {
  using namespace dt;
  using namespace dt::bench;
  const Options o = parse_args(argc, argv,
                               "bench_serve [--url http://HOST:PORT] [--model gpt-small|gpt-tiny] [--requests N] [--rate R] [--prefix-rate R] [--prompt P] "
                               "[--output O] [--max-num-seqs S] [--block-size B] [--seed N] [--slow-connections K] [--quick] [--json PATH]",
                               {"url", "model", "requests", "rate", "prefix-rate", "prompt", "output", "max-num-seqs", "block-size", "seed",
                                "slow-connections"});
  const std::string model_name = option_value(o, "model", o.quick ? "gpt-tiny" : "gpt-small");
  const nn::GPTConfig* preset = nn::gpt_preset(model_name);
  if (!preset) {
    std::fprintf(stderr, "bench_serve: --model %s; accepted: %s\n", model_name.c_str(), nn::gpt_preset_names().c_str());
    return 2;
  }
  const nn::GPTConfig cfg = preset->resolved();
  const int n = std::stoi(option_value(o, "requests", o.quick ? "16" : "64"));
  const double rate = std::stod(option_value(o, "rate", "0"));
  const double prefix_rate = std::stod(option_value(o, "prefix-rate", o.quick ? "0" : "8"));
  const int64_t P = std::stoll(option_value(o, "prompt", o.quick ? "24" : "32"));
  const int64_t O = std::stoll(option_value(o, "output", o.quick ? "24" : "224"));
  const int64_t S = std::stoll(option_value(o, "max-num-seqs", "16"));
  const int64_t B = std::stoll(option_value(o, "block-size", "16"));
  const uint64_t seed = std::stoull(option_value(o, "seed", "1"));
  if (P + O > cfg.context || n < 1 || P < 4 || O < 8 || rate < 0 || prefix_rate < 0) {
    std::fprintf(stderr, "bench_serve: --prompt + --output must fit the context (%lld), --prompt >= 4, --output >= 8\n",
                 static_cast<long long>(cfg.context));
    return 2;
  }
  const std::string url = option_value(o, "url", "");
  const int slow = static_cast<int>(std::strtol(option_value(o, "slow-connections", "0").c_str(), nullptr, 10));
  if (slow < 0 || slow > 4096 || (slow > 0 && url.empty())) {
    std::fprintf(stderr, "bench_serve: --slow-connections %d; accepted: 0 to 4096, with --url\n", slow);
    return 2;
  }
  if (!url.empty()) return http_load(url, n, rate, P, O, seed, slow, o.json_path);
  if (o.threads > 0) set_kernel_threads(o.threads);
  nn::GPT model(cfg);
  Report rep("bench_serve");
  rep.meta()
      .str("model", model_name)
      .num("requests", n)
      .num("rate_per_s", rate)
      .num("prefix_rate_per_s", prefix_rate)
      .num("max_num_seqs", static_cast<double>(S))
      .num("block_size", static_cast<double>(B))
      .str("load_average", load_average());
  std::printf("bench_serve: %s (%lld layers, d_model %lld, context %lld), %d requests at %s, max_num_seqs %lld, "
              "block %lld; load %s\n",
              model_name.c_str(), static_cast<long long>(cfg.n_layer), static_cast<long long>(cfg.d_model),
              static_cast<long long>(cfg.context), n, rate > 0 ? strf("%.1f/s (Poisson)", rate).c_str() : "once",
              static_cast<long long>(S), static_cast<long long>(B), load_average().c_str());

  serve::EngineConfig ec;
  ec.block_size = B;
  ec.max_num_seqs = S;
  ec.max_batched_tokens = std::max<int64_t>(256, S * P);  // static batching admits a whole batch at once
  ec.num_blocks = S * ((cfg.context + B - 1) / B);         // room for every running request
  // 1. Continuous against static batching, the same mixed-length requests.
  const std::vector<Req> mixed = workload(n, rate, P / 4, P, 8, O, O / 4.0, 0, cfg.vocab_size, seed);
  ec.prefix_caching = false;
  serve::EngineConfig st = ec;
  st.static_batching = true;
  const Run cont = drive(cfg, model, ec, mixed, "continuous batching");
  const Run stat = drive(cfg, model, st, mixed, "static batching");
  std::printf("continuous vs static batching (prompts %lld-%lld tokens, outputs 8-%lld with mean %lld):\n",
              static_cast<long long>(P / 4), static_cast<long long>(P), static_cast<long long>(O),
              static_cast<long long>(O / 4));
  print_run("static batching", stat);
  print_run("continuous batching", cont);
  std::printf("  throughput ratio continuous / static: %.2fx; p99 TTFT ratio continuous / static: %.2f\n",
              cont.tokens_per_s / stat.tokens_per_s, cont.ttft.quantile(0.99) / stat.ttft.quantile(0.99));
  record(rep, "batching", "static", stat);
  record(rep, "batching", "continuous", cont);
  rep.anchors().num("static_tokens_per_s", stat.tokens_per_s).num("static_ttft_p99_s", stat.ttft.quantile(0.99));

  // 2. Prefix caching: half of every prompt is one shared prefix; short outputs, so the
  // prefill dominates TTFT.
  const std::vector<Req> shared = workload(n, prefix_rate, P, P, 8, 8, 0, P / 2, cfg.vocab_size, seed + 1);
  serve::EngineConfig pc = ec;
  pc.prefix_caching = false;
  const Run off = drive(cfg, model, pc, shared, "without prefix caching");
  pc.prefix_caching = true;
  const Run on = drive(cfg, model, pc, shared, "with prefix caching");
  std::printf("prefix caching (prompts of %lld tokens, the first %lld shared):\n", static_cast<long long>(P),
              static_cast<long long>(P / 2));
  print_run("without", off);
  print_run("with", on);
  std::printf("  TTFT p50 with / without: %.2f; prompt positions found in the cache: %lld of %lld\n",
              on.ttft.quantile(0.5) / off.ttft.quantile(0.5), static_cast<long long>(on.prefix_hits),
              static_cast<long long>(n * P));
  record(rep, "prefix_caching", "off", off);
  record(rep, "prefix_caching", "on", on);

  // 3. KV memory: the paged cache's peak against contiguous caches of the context for the
  // requests running at once.
  const double paged = static_cast<double>(cont.peak_blocks * cont.bytes_per_block);
  const double contiguous = static_cast<double>(cont.peak_running) * static_cast<double>(cfg.context) *
                            static_cast<double>(cont.bytes_per_block) / static_cast<double>(B);
  std::printf("KV memory at the peak of continuous batching: paged %.2f MiB (%lld blocks) vs contiguous max-context "
              "%.2f MiB (%lld requests x %lld positions): %.2fx less\n",
              paged / (1 << 20), static_cast<long long>(cont.peak_blocks), contiguous / (1 << 20),
              static_cast<long long>(cont.peak_running), static_cast<long long>(cfg.context), contiguous / paged);
  rep.add("kv_memory", "paged_vs_contiguous")
      .num("paged_peak_bytes", paged)
      .num("contiguous_bytes", contiguous)
      .num("ratio", contiguous / paged);
  if (!o.json_path.empty() && !rep.write(o.json_path)) return 1;
  return 0;
}
