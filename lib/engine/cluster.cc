#include "engine/cluster.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include "core/error.h"

namespace dt::engine {
namespace {

// Each field once: its JSON name, where it lives, and its accepted range.
struct Field {
  const char* name;
  double Cluster::*real;
  int64_t Cluster::*integer;
  double lo, hi;
};
const std::vector<Field>& fields() {
  static const std::vector<Field> f = {
      {"hosts", nullptr, &Cluster::hosts, 1, 1e6},
      {"devices_per_host", nullptr, &Cluster::devices_per_host, 1, 1e4},
      {"device_memory", &Cluster::device_memory, nullptr, 1, 1e18},
      {"matmul_flops_f32", &Cluster::matmul_flops_f32, nullptr, 1e6, 1e18},
      {"matmul_flops_16", &Cluster::matmul_flops_16, nullptr, 1e6, 1e18},
      {"matmul_call_s", &Cluster::matmul_call_s, nullptr, 0, 1},
      {"attention_flops_f32", &Cluster::attention_flops_f32, nullptr, 1e6, 1e18},
      {"attention_flops_16", &Cluster::attention_flops_16, nullptr, 1e6, 1e18},
      {"memory_bandwidth", &Cluster::memory_bandwidth, nullptr, 1e6, 1e15},
      {"op_call_s", &Cluster::op_call_s, nullptr, 0, 1},
      {"gelu_fwd_s", &Cluster::gelu_fwd_s, nullptr, 0, 1e-6},
      {"gelu_bwd_s", &Cluster::gelu_bwd_s, nullptr, 0, 1e-6},
      {"swiglu_fwd_s", &Cluster::swiglu_fwd_s, nullptr, 0, 1e-6},
      {"swiglu_bwd_s", &Cluster::swiglu_bwd_s, nullptr, 0, 1e-6},
      {"rope_fwd_s", &Cluster::rope_fwd_s, nullptr, 0, 1e-6},
      {"rope_bwd_s", &Cluster::rope_bwd_s, nullptr, 0, 1e-6},
      {"pool_speedup", &Cluster::pool_speedup, nullptr, 1, 1e4},
      {"shared_core_speed", &Cluster::shared_core_speed, nullptr, 0.01, 1},
      {"attention_backward_ratio", &Cluster::attention_backward_ratio, nullptr, 0.1, 100},
      {"compute_efficiency", &Cluster::compute_efficiency, nullptr, 0.01, 10},
      {"prefill_efficiency", &Cluster::prefill_efficiency, nullptr, 0.01, 10},
      {"decode_efficiency", &Cluster::decode_efficiency, nullptr, 0.01, 10},
      {"kv_row_s", &Cluster::kv_row_s, nullptr, 0, 1e-3},
      {"moe_row_s", &Cluster::moe_row_s, nullptr, 0, 1e-3},
      {"ring_step_s", &Cluster::ring_step_s, nullptr, 0, 1},
      {"ep_exchange_s", &Cluster::ep_exchange_s, nullptr, 0, 1},
      {"recompute_ratio", &Cluster::recompute_ratio, nullptr, 0.1, 10},
      {"peak_flops_f32", &Cluster::peak_flops_f32, nullptr, 0, 1e18},
      {"peak_flops_16", &Cluster::peak_flops_16, nullptr, 0, 1e18},
  };
  return f;
}

void check_range(const std::string& what, double v, double lo, double hi) {
  DT_CHECK(std::isfinite(v) && v >= lo && v <= hi, what + " = " + std::to_string(v) + "; accepted: " +
                                                       std::to_string(lo) + " to " + std::to_string(hi));
}

Link link_from(const nlohmann::json& j, const std::string& what) {
  DT_CHECK(j.is_object(), what + ": expected an object {\"bandwidth\": bytes/s, \"latency\": s, ...}");
  Link l;
  for (const auto& [k, v] : j.items()) {
    DT_CHECK(v.is_number(), what + "." + k + ": expected a number");
    const double x = v.get<double>();
    if (k == "bandwidth") l.bandwidth = x;
    else if (k == "latency") l.latency = x;
    else if (k == "all_gather") l.all_gather = x;
    else if (k == "reduce_scatter") l.reduce_scatter = x;
    else if (k == "p2p") l.p2p = x;
    else dt::invalid(what + ": unknown key \"" + k + "\"; accepted: bandwidth, latency, all_gather, reduce_scatter, p2p");
    if (k != "latency") check_range(what + "." + k, x, 0, 1e15);
  }
  return l;
}

// A list of numbers in [lo, hi].
std::vector<double> numbers(const nlohmann::json& j, const std::string& what, double lo, double hi) {
  DT_CHECK(j.is_array() && j.size() <= 64, what + ": expected an array of at most 64 numbers");
  std::vector<double> out;
  for (const auto& v : j) {
    DT_CHECK(v.is_number(), what + ": expected numbers");
    check_range(what + "[" + std::to_string(out.size()) + "]", v.get<double>(), lo, hi);
    out.push_back(v.get<double>());
  }
  return out;
}

// A node of 8 GPUs from its data sheet (docs/planner-hardware.md): the achieved fractions
// are the ones that page sources (best large bf16 GEMMs 80-87% of peak, flash attention
// about half, NCCL's ring about 80% of one-way NVLink, NDR about 92% of its line rate).
Cluster gpu_node(const std::string& name, double memory, double f32, double f16, double hbm, double nvlink,
                 double ib, const std::string& source) {
  Cluster c;
  c.name = name;
  c.source = source;
  c.devices_per_host = 8;
  c.device_memory = memory;
  c.peak_flops_f32 = f32;
  c.peak_flops_16 = f16;
  c.matmul_flops_f32 = 0.8 * f32;  // f32 GEMMs without tensor cores
  c.matmul_flops_16 = 0.7 * f16;   // a transformer's mix of GEMM shapes, below the best one's 80%
  c.matmul_call_s = 5e-6;
  c.attention_flops_f32 = 0.4 * f32;
  c.attention_flops_16 = 0.5 * f16;
  c.memory_bandwidth = 0.85 * hbm;
  c.op_call_s = 4e-6;
  c.intra = {0.8 * nvlink, 10e-6};
  c.inter = {0.92 * ib, 30e-6};
  c.overlap_comm = true;
  return c;
}

}  // namespace

nlohmann::json link_to_json(const Link& l) {
  return {{"bandwidth", l.bandwidth}, {"latency", l.latency},       {"all_gather", l.all_gather},
          {"reduce_scatter", l.reduce_scatter}, {"p2p", l.p2p}};
}

double Cluster::matmul_rate_at(double size) const {
  if (matmul_sizes.empty()) return 1.0;
  if (size <= matmul_sizes.front()) return matmul_efficiency.front();
  for (size_t i = 1; i < matmul_sizes.size(); ++i) {
    if (size <= matmul_sizes[i]) {
      const double t = std::log(size / matmul_sizes[i - 1]) / std::log(matmul_sizes[i] / matmul_sizes[i - 1]);
      return matmul_efficiency[i - 1] + t * (matmul_efficiency[i] - matmul_efficiency[i - 1]);
    }
  }
  return matmul_efficiency.back();
}

void Cluster::check() const {
  DT_CHECK(matmul_sizes.size() == matmul_efficiency.size(),
           "cluster.matmul_sizes and cluster.matmul_efficiency: expected as many numbers in each");
  for (size_t i = 1; i < matmul_sizes.size(); ++i)
    DT_CHECK(matmul_sizes[i] > matmul_sizes[i - 1], "cluster.matmul_sizes: expected increasing sizes");
  check_range("cluster.hosts", static_cast<double>(hosts), 1, 1e6);
  check_range("cluster.devices_per_host", static_cast<double>(devices_per_host), 1, 1e4);
  for (const Field& f : fields())
    if (f.real) check_range("cluster." + std::string(f.name), this->*f.real, f.lo, f.hi);
  check_range("cluster.intra.bandwidth", intra.bandwidth, 1e3, 1e15);
  check_range("cluster.intra.latency", intra.latency, 0, 1);
  if (hosts > 1) {
    check_range("cluster.inter.bandwidth", inter.bandwidth, 1e3, 1e15);
    check_range("cluster.inter.latency", inter.latency, 0, 1);
  }
}

nlohmann::json cluster_to_json(const Cluster& c) {
  nlohmann::json j = {{"name", c.name}, {"source", c.source}, {"cpu", c.cpu}, {"overlap_comm", c.overlap_comm},
                      {"intra", link_to_json(c.intra)}, {"inter", link_to_json(c.inter)},
                      {"processes", link_to_json(c.processes)},
                      {"matmul_sizes", c.matmul_sizes}, {"matmul_efficiency", c.matmul_efficiency}};
  for (const Field& f : fields()) {
    if (f.real) j[f.name] = c.*f.real;
    else j[f.name] = c.*f.integer;
  }
  return j;
}

Cluster cluster_from_json(const nlohmann::json& j, const std::string& what) {
  DT_CHECK(j.is_object(), what + ": expected a JSON object describing a cluster");
  DT_CHECK(j.contains("name") && j["name"].is_string(), what + ": \"name\" (a string) is required");
  Cluster c;
  std::string accepted = "name, source, cpu, overlap_comm, intra, inter, processes, matmul_sizes, matmul_efficiency";
  for (const Field& f : fields()) accepted += std::string(", ") + f.name;
  for (const auto& [k, v] : j.items()) {
    const std::string at = what + "." + k;
    if (k == "name" || k == "source") {
      DT_CHECK(v.is_string(), at + ": expected a string");
      (k == "name" ? c.name : c.source) = v.get<std::string>();
    } else if (k == "cpu" || k == "overlap_comm") {
      DT_CHECK(v.is_boolean(), at + ": expected true or false");
      (k == "cpu" ? c.cpu : c.overlap_comm) = v.get<bool>();
    } else if (k == "intra" || k == "inter" || k == "processes") {
      (k == "intra" ? c.intra : k == "inter" ? c.inter : c.processes) = link_from(v, at);
    } else if (k == "matmul_sizes") {
      c.matmul_sizes = numbers(v, at, 1, 1e9);
    } else if (k == "matmul_efficiency") {
      c.matmul_efficiency = numbers(v, at, 1e-3, 10);
    } else {
      const Field* f = nullptr;
      for (const Field& x : fields())
        if (k == x.name) f = &x;
      DT_CHECK(f, what + ": unknown key \"" + k + "\"; accepted: " + accepted);
      DT_CHECK(v.is_number(), at + ": expected a number");
      if (f->real) {
        c.*(f->real) = v.get<double>();
      } else {
        DT_CHECK(v.is_number_integer(), at + ": expected an integer");
        check_range(at, v.get<double>(), f->lo, f->hi);
        c.*(f->integer) = v.get<int64_t>();
      }
    }
  }
  c.check();
  return c;
}

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

Cluster median_cluster(const std::vector<Cluster>& runs) {
  DT_CHECK(!runs.empty(), "median_cluster: no calibrations given");
  Cluster out = runs.front();
  auto of = [&](auto&& get) {
    std::vector<double> v;
    for (const Cluster& c : runs) v.push_back(get(c));
    return median(std::move(v));
  };
  for (const Field& f : fields())
    if (f.real) out.*f.real = of([&](const Cluster& c) { return c.*f.real; });
  for (Link Cluster::*l : {&Cluster::intra, &Cluster::inter, &Cluster::processes}) {
    std::vector<const Link*> measured;  // a link a run did not time (bandwidth 0) stays out
    for (const Cluster& c : runs)
      if ((c.*l).bandwidth > 0) measured.push_back(&(c.*l));
    if (measured.empty()) continue;
    for (double Link::*x : {&Link::bandwidth, &Link::latency, &Link::all_gather, &Link::reduce_scatter, &Link::p2p}) {
      std::vector<double> v;
      for (const Link* m : measured) v.push_back(m->*x);
      out.*l.*x = median(std::move(v));
    }
  }
  for (size_t i = 0; i < out.matmul_efficiency.size(); ++i)  // the curve's points, where the runs share the sizes
    out.matmul_efficiency[i] = of([&](const Cluster& c) {
      return c.matmul_sizes == out.matmul_sizes ? c.matmul_efficiency[i] : out.matmul_efficiency[i];
    });
  out.check();
  return out;
}

std::vector<std::string> builtin_cluster_names() { return {"a100-node", "h100-node", "h200-node", "cpu-default"}; }

Cluster builtin_cluster(const std::string& name) {
  if (name == "a100-node")
    return gpu_node(name, 85899345920.0, 19.5e12, 312e12, 2.039e12, 300e9, 25e9,
                    "DGX A100 (A100-SXM4-80GB, NVLink 3, HDR InfiniBand): docs/planner-hardware.md");
  if (name == "h100-node")
    return gpu_node(name, 85520809984.0, 67e12, 989.4e12, 3.35e12, 450e9, 50e9,
                    "DGX H100 (H100-SXM5-80GB, NVLink 4, NDR InfiniBand): docs/planner-hardware.md");
  if (name == "h200-node")
    return gpu_node(name, 150754820096.0, 67e12, 989.4e12, 4.8e12, 450e9, 50e9,
                    "DGX H200 (H200-SXM-141GB, NVLink 4, NDR InfiniBand): docs/planner-hardware.md");
  if (name == "cpu-default") {  // a guess for an uncalibrated 2-core host: calibrate instead
    Cluster c;
    c.name = name;
    c.source = "built-in guess for an uncalibrated 2-core host; run dtrain plan --calibrate";
    c.cpu = true;
    c.devices_per_host = 2;
    c.device_memory = 16e9;
    c.matmul_flops_f32 = 50e9;
    c.matmul_flops_16 = 25e9;
    c.matmul_call_s = 5e-6;
    c.attention_flops_f32 = 10e9;
    c.attention_flops_16 = 5e9;
    c.memory_bandwidth = 8e9;
    c.op_call_s = 2e-6;
    c.pool_speedup = 1.8;
    c.intra = {4e9, 20e-6};
    c.inter = {1e9, 50e-6};
    c.overlap_comm = false;
    return c;
  }
  std::string names;
  for (const std::string& n : builtin_cluster_names()) names += (names.empty() ? "" : ", ") + n;
  dt::fail(DT_ERR_NOT_FOUND, "cluster \"" + name + "\" is not built in; accepted: " + names +
                                 ", or a cluster JSON file (dtrain plan --calibrate writes this machine's)");
}

Cluster parse_cluster(const std::string& text, const std::string& what) {
  const size_t start = text.find_first_not_of(" \t\r\n");
  if (start != std::string::npos && text[start] == '{') {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    DT_CHECK(!j.is_discarded(), what + ": not valid JSON");
    return cluster_from_json(j, what);
  }
  const size_t colon = text.find(':');
  Cluster c = builtin_cluster(text.substr(0, colon));
  if (colon != std::string::npos) {
    const std::string hosts = text.substr(colon + 1);
    char* end = nullptr;
    const long long h = std::strtoll(hosts.c_str(), &end, 10);
    DT_CHECK(!hosts.empty() && end && *end == '\0' && h >= 1 && h <= 1000000,
             what + ": hosts \"" + hosts + "\" after the name; accepted: 1 to 1000000 (e.g. h100-node:16)");
    c.hosts = h;
  }
  return c;
}

}  // namespace dt::engine
