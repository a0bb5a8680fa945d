// Serving's figures: latency histograms (Prometheus' cumulative buckets) and counters,
// written as Prometheus text (GET /metrics) or JSON (dt_server_stats_json).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dt::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);  // upper bounds in seconds, ascending
  void observe(double v);
  // Prometheus text: name_bucket{le=".."}, name_sum, name_count.
  std::string prometheus(const std::string& name, const std::string& help) const;
  // The q-quantile (0..1) of the last kRecent observations, exactly; 0 if none. (The
  // buckets, count and sum cover them all; only so many values are kept, so that a server
  // that runs for days holds a bounded amount and a scrape costs a bounded time.)
  double quantile(double q) const;
  static constexpr size_t kRecent = 10000;
  int64_t count() const { return count_; }
  double mean() const { return count_ == 0 ? 0.0 : sum_ / static_cast<double>(count_); }
  nlohmann::json json() const;  // {"count":..,"mean":..,"p50":..,"p90":..,"p99":..}

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  std::vector<double> values_;  // the last kRecent, a ring from next_
  size_t next_ = 0;
  int64_t count_ = 0;
  double sum_ = 0;
};

// Buckets for TTFT and inter-token latency: 1 ms to 60 s.
std::vector<double> latency_buckets();

}  // namespace dt::serve
