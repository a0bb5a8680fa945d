#include "serve/metrics.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace dt::serve {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  ++counts_[i];
  if (values_.size() < kRecent) {
    values_.push_back(v);
  } else {
    values_[next_] = v;
    next_ = (next_ + 1) % kRecent;
  }
  ++count_;
  sum_ += v;
}

double Histogram::quantile(double q) const {
  if (values_.empty()) return 0.0;
  std::vector<double> v = values_;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - (q > 0));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

std::string Histogram::prometheus(const std::string& name, const std::string& help) const {
  std::ostringstream o;
  o << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
  int64_t c = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    c += counts_[i];
    o << name << "_bucket{le=\"" << bounds_[i] << "\"} " << c << "\n";
  }
  c += counts_.back();
  o << name << "_bucket{le=\"+Inf\"} " << c << "\n" << name << "_sum " << sum_ << "\n" << name << "_count " << c << "\n";
  return o.str();
}

nlohmann::json Histogram::json() const {
  return {{"count", count()}, {"mean", mean()}, {"p50", quantile(0.5)}, {"p90", quantile(0.9)}, {"p99", quantile(0.99)}};
}

std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

}  // namespace dt::serve
