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
  // The q-quantile (0..1) of what was observed, exactly (the values are kept); 0 if none.
  double quantile(double q) const;
  int64_t count() const { return static_cast<int64_t>(values_.size()); }
  double mean() const { return values_.empty() ? 0.0 : sum_ / static_cast<double>(values_.size()); }
  nlohmann::json json() const;  // {"count":..,"mean":..,"p50":..,"p90":..,"p99":..}

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  std::vector<double> values_;
  double sum_ = 0;
};

// Buckets for TTFT and inter-token latency: 1 ms to 60 s.
std::vector<double> latency_buckets();

}  // namespace dt::serve
