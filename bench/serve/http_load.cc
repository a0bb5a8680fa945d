#include "serve/http_load.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

#include "common/bench_util.h"

namespace dt::bench {
namespace {

// "name{labels} value" lines of a Prometheus text page, by "name{labels}".
std::map<std::string, double> scrape(httplib::Client& c) {
  std::map<std::string, double> m;
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) return m;
  size_t at = 0;
  const std::string& t = r->body;
  while (at < t.size()) {
    const size_t end = std::min(t.find('\n', at), t.size());
    const std::string line = t.substr(at, end - at);
    at = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    if (sp != std::string::npos) m[line.substr(0, sp)] = std::atof(line.c_str() + sp + 1);
  }
  return m;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace

int http_load(const std::string& url, int n, double rate, long long prompt, long long output, unsigned long long seed,
              const std::string& json_path) {
  httplib::Client c(url);
  c.set_read_timeout(600);
  auto models = c.Get("/v1/models");
  if (!models || models->status != 200) {
    std::fprintf(stderr, "bench_serve: no dtrain serve answers at %s (GET /v1/models)\n", url.c_str());
    return 2;
  }
  const nlohmann::json m = nlohmann::json::parse(models->body)["data"][0];
  const std::string name = m["id"];
  const long long context = m.value("max_model_len", 0LL), vocab = m.value("vocab_size", 256LL);
  if (prompt + output > context) {
    std::fprintf(stderr, "bench_serve: --prompt %lld + --output %lld exceed the served model's context %lld\n", prompt,
                 output, context);
    return 2;
  }
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate > 0 ? rate : 1.0), out(4.0 / static_cast<double>(output));
  struct Job {
    double at;
    nlohmann::json body;
  };
  std::vector<Job> jobs;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    if (rate > 0) t += gap(rng);
    std::vector<int> ids(static_cast<size_t>(prompt / 4 + static_cast<long long>(rng() % static_cast<unsigned long long>(prompt - prompt / 4 + 1))));
    for (int& x : ids) x = static_cast<int>(rng() % static_cast<unsigned long long>(vocab));
    const long long o = std::clamp(static_cast<long long>(out(rng)), 8LL, output);
    jobs.push_back({t, {{"model", name}, {"prompt", ids}, {"max_tokens", o}, {"temperature", 0}, {"stream", true}}});
  }
  const std::map<std::string, double> before = scrape(c);
  std::vector<double> ttft(static_cast<size_t>(n), -1);
  std::vector<std::thread> threads;
  std::mutex mu;
  int failed = 0;
  const double t0 = now_s();
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      std::this_thread::sleep_for(std::chrono::duration<double>(jobs[static_cast<size_t>(i)].at));
      const double start = t0 + jobs[static_cast<size_t>(i)].at;
      httplib::Client cl(url);
      cl.set_read_timeout(600);
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.body = jobs[static_cast<size_t>(i)].body.dump();
      req.set_header("Content-Type", "application/json");
      req.content_receiver = [&](const char*, size_t len, uint64_t, uint64_t) {
        if (len > 0 && ttft[static_cast<size_t>(i)] < 0) ttft[static_cast<size_t>(i)] = now_s() - start;
        return true;
      };
      auto r = cl.send(req);
      if (!r || r->status != 200) {
        std::lock_guard<std::mutex> lk(mu);
        ++failed;
      }
    });
  for (auto& th : threads) th.join();
  const double wall = now_s() - t0;
  const std::map<std::string, double> after = scrape(c);
  auto delta = [&](const std::string& k) { return after.count(k) ? after.at(k) - (before.count(k) ? before.at(k) : 0) : 0.0; };
  const double tokens = delta("dtrain_generated_tokens_total");
  const double itl_n = delta("dtrain_inter_token_latency_seconds_count");
  const double itl_mean = itl_n > 0 ? delta("dtrain_inter_token_latency_seconds_sum") / itl_n : 0;
  std::vector<double> got;
  for (double x : ttft)
    if (x >= 0) got.push_back(x);
  std::printf("over HTTP (%s, model %s): %d requests, %d failed, %.1f s; %.1f tokens/s; client TTFT p50 %.1f p90 %.1f "
              "p99 %.1f ms; server ITL mean %.1f ms; preemptions %.0f; KV blocks used %.0f after\n",
              url.c_str(), name.c_str(), n, failed, wall, tokens / wall, 1e3 * quantile(got, 0.5),
              1e3 * quantile(got, 0.9), 1e3 * quantile(got, 0.99), 1e3 * itl_mean, delta("dtrain_preemptions_total"),
              after.count("dtrain_kv_blocks{state=\"used\"}") ? after.at("dtrain_kv_blocks{state=\"used\"}") : -1.0);
  Report rep("bench_serve");
  rep.meta().str("url", url).str("model", name).num("requests", n).num("rate_per_s", rate).str("load_average", load_average());
  rep.add("http", "load")
      .num("tokens_per_s", tokens / wall)
      .num("wall_s", wall)
      .num("failed", failed)
      .num("ttft_p50_s", quantile(got, 0.5))
      .num("ttft_p90_s", quantile(got, 0.9))
      .num("ttft_p99_s", quantile(got, 0.99))
      .num("server_itl_mean_s", itl_mean)
      .num("preemptions", delta("dtrain_preemptions_total"));
  if (!json_path.empty() && !rep.write(json_path)) return 1;
  return failed == 0 ? 0 : 1;
}

}  // namespace dt::bench
