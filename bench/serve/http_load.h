// bench_serve --url: the same kind of load against a running `dtrain serve` over HTTP.
#pragma once
#include <string>

namespace dt::bench {

// Sends n streamed completions at Poisson `rate` per second (0: all at once), prompts of
// token ids uniform in [prompt/4, prompt] and outputs exponential with mean output/4 in
// [8, output], from one thread per request; prints the client's TTFT (to the first event)
// p50/p90/p99 and the server's throughput, inter-token latency, KV blocks and preemptions
// (from /metrics, before and after). slow_connections > 0: the same load again with that
// many slow clients holding connections open (a request head a byte a second), and the
// ratios of the two runs. Returns the process exit code.
int http_load(const std::string& url, int n, double rate, long long prompt, long long output, unsigned long long seed,
              int slow_connections, const std::string& json_path);

}  // namespace dt::bench
