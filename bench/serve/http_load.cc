#include "serve/http_load.h"

#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

struct LoadResult {
  double wall = 0, tokens = 0, itl_mean = 0, preemptions = 0, used_blocks = -1, p50 = 0, p90 = 0, p99 = 0;
  int failed = 0;
};

// Connections that send a request's head a byte a second and never finish it (a slow
// client): what must not slow anyone else down. Closed when destroyed.
class SlowClients {
 public:
  SlowClients(const std::string& url, int n) {
    const std::string hostport = url.substr(url.find("://") == std::string::npos ? 0 : url.find("://") + 3);
    const std::string host = hostport.substr(0, hostport.rfind(':')), port = hostport.substr(hostport.rfind(':') + 1);
    addrinfo hints{}, *res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0) return;
    for (int i = 0; i < n; ++i) {
      const int fd = ::socket(res->ai_family, SOCK_STREAM, 0);
      if (fd < 0 || ::connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
        if (fd >= 0) ::close(fd);
        continue;
      }
      const char head[] = "POST /v1/completions HTTP/1.1\r\n";
      (void)!::send(fd, head, sizeof head - 1, MSG_NOSIGNAL);
      fds_.push_back(fd);
    }
    freeaddrinfo(res);
    drip_ = std::thread([this] {
      while (!stop_) {
        for (int fd : fds_) (void)!::send(fd, "X", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        for (int i = 0; i < 10 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  ~SlowClients() {
    stop_ = true;
    if (drip_.joinable()) drip_.join();
    for (int fd : fds_) ::close(fd);
  }
  size_t open() const { return fds_.size(); }

 private:
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::thread drip_;
};

LoadResult run_load(const std::string& url, int n, double rate, long long prompt, long long output, unsigned long long seed,
                    const std::string& name, long long vocab) {
  httplib::Client c(url);
  c.set_read_timeout(600);
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
  LoadResult r;
  r.wall = wall;
  r.tokens = tokens;
  r.itl_mean = itl_mean;
  r.failed = failed;
  r.preemptions = delta("dtrain_preemptions_total");
  r.used_blocks = after.count("dtrain_kv_blocks{state=\"used\"}") ? after.at("dtrain_kv_blocks{state=\"used\"}") : -1.0;
  r.p50 = quantile(got, 0.5);
  r.p90 = quantile(got, 0.9);
  r.p99 = quantile(got, 0.99);
  return r;
}

}  // namespace

int http_load(const std::string& url, int n, double rate, long long prompt, long long output, unsigned long long seed,
              int slow_connections, const std::string& json_path) {
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
  Report rep("bench_serve");
  rep.meta().str("url", url).str("model", name).num("requests", n).num("rate_per_s", rate).str("load_average", load_average());
  auto report = [&](const char* label, const LoadResult& r) {
    std::printf("over HTTP (%s, model %s)%s: %d requests, %d failed, %.1f s; %.1f tokens/s; client TTFT p50 %.1f p90 %.1f "
                "p99 %.1f ms; server ITL mean %.1f ms; preemptions %.0f; KV blocks used %.0f after\n",
                url.c_str(), name.c_str(), label, n, r.failed, r.wall, r.tokens / r.wall, 1e3 * r.p50, 1e3 * r.p90,
                1e3 * r.p99, 1e3 * r.itl_mean, r.preemptions, r.used_blocks);
    rep.add("http", *label ? "load_with_slow_connections" : "load")
        .num("tokens_per_s", r.tokens / r.wall)
        .num("wall_s", r.wall)
        .num("failed", r.failed)
        .num("ttft_p50_s", r.p50)
        .num("ttft_p90_s", r.p90)
        .num("ttft_p99_s", r.p99)
        .num("server_itl_mean_s", r.itl_mean)
        .num("preemptions", r.preemptions);
    std::fflush(stdout);
  };
  const LoadResult base = run_load(url, n, rate, prompt, output, seed, name, vocab);
  report("", base);
  int failed = base.failed;
  if (slow_connections > 0) {
    // The same load again (the same requests) with slow clients holding connections open;
    // the anchor is the run just before, on the same server.
    SlowClients slow(url, slow_connections);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    char label[64];
    std::snprintf(label, sizeof label, " with %zu slow connections held open", slow.open());
    const LoadResult held = run_load(url, n, rate, prompt, output, seed, name, vocab);
    report(label, held);
    failed += held.failed;
    const double tput = (held.tokens / held.wall) / (base.tokens / base.wall);
    std::printf("slow connections: throughput %.2fx, TTFT p50 %.2fx, p99 %.2fx of the run without them\n", tput,
                held.p50 / std::max(base.p50, 1e-9), held.p99 / std::max(base.p99, 1e-9));
    rep.add("http", "slow_connection_ratios")
        .num("slow_connections", static_cast<double>(slow.open()))
        .num("throughput_ratio", tput)
        .num("ttft_p50_ratio", held.p50 / std::max(base.p50, 1e-9))
        .num("ttft_p99_ratio", held.p99 / std::max(base.p99, 1e-9));
  }
  if (!json_path.empty() && !rep.write(json_path)) return 1;
  return failed == 0 ? 0 : 1;
}

}  // namespace dt::bench
