#include "engine/plan_search.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "engine/plan.h"
#include "engine/plan_cost.h"

namespace dt::engine {
namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

nlohmann::json layout_json(const PlanOptions& o) {
  nlohmann::json j = {{"dp", o.dp}, {"tp", o.tp}, {"pp", o.pp}, {"zero", o.zero}, {"sp", o.sequence_parallel},
                      {"micro_batch", o.micro_batch}, {"micro_batches", o.accumulation}, {"recompute", o.recompute}};
  if (o.ep > 1) j["ep"] = o.ep;
  if (o.cp > 1) j["cp"] = o.cp;
  if (o.pp > 1) {
    j["pp_schedule"] = o.pp_schedule;
    j["virtual_stages"] = o.virtual_stages;
  }
  return j;
}

// Why `c` is slower than `best`: the part of the step where it loses the most.
std::string loses_by(const nlohmann::json& c, const nlohmann::json& best) {
  const nlohmann::json &t = c["time"], &b = best["time"];
  const std::pair<const char*, const char*> parts[] = {
      {"compute_s", "compute (smaller or fewer GEMMs per device)"},
      {"recompute_s", "recomputing activations"},
      {"tp_comm_s", "tensor-parallel communication"},
      {"cp_comm_exposed_s", "context-parallel ring transfers not hidden by attention"},
      {"ep_comm_s", "expert-parallel all-to-all"},
      {"dp_comm_exposed_s", "data-parallel communication not hidden by the backward"},
      {"pp_bubble_s", "pipeline bubble"},
      {"optimizer_s", "optimizer step (less of the state sharded)"},
      {"shared_cores_extra_s", "ranks sharing cores"}};
  std::string why = c["peak_bytes"].get<double>() < best["peak_bytes"].get<double>()
                        ? "a tie on time (it needs less memory)"
                        : "a tie on time";
  double most = 0;
  for (const auto& [key, text] : parts) {
    const double d = t.value(key, 0.0) - b.value(key, 0.0);
    if (d > most) {
      most = d;
      char pct[32];
      std::snprintf(pct, sizeof pct, " +%.1f%%", 100.0 * d / best["step_s"].get<double>());
      why = std::string(text) + pct + " of the best step";
    }
  }
  return why;
}

}  // namespace

nlohmann::json search_json(const nn::GPTConfig& raw, const SearchOptions& so, const Cluster& cl) {
  cl.check();
  DT_CHECK(so.global_batch >= 1 && so.global_batch <= (1 << 24),
           "global_batch = " + std::to_string(so.global_batch) + "; accepted: 1 to 16777216 sequences per step");
  DT_CHECK(so.top >= 1 && so.top <= 1000, "top = " + std::to_string(so.top) + "; accepted: 1 to 1000");
  const nn::GPTConfig c = [&] {
    nn::GPTConfig x = raw.resolved();
    x.checkpoint = false;  // the search decides where to recompute
    return x;
  }();
  const int64_t devices = cl.devices();
  const int64_t T = so.seq_len > 0 ? so.seq_len : c.context;
  nlohmann::json fitting = nlohmann::json::array();
  std::map<std::string, int64_t> rejected;
  int64_t evaluated = 0;
  nlohmann::json smallest;  // the layout needing the least memory, when nothing fits
  // A layout at every ZeRO stage its data-parallel ranks allow, each with recompute only
  // where keeping the activations does not fit (plan: base's formulas, the same for all).
  auto cost_stages = [&](const PlanOptions& base, const nlohmann::json& plan) {
    const int64_t dps = base.dp * base.cp;  // ZeRO shards over dp x cp (under ep over dp alone)
    for (int zero = 0; zero <= (dps > 1 ? (base.pp > 1 ? 2 : 3) : 0); ++zero) {
      if (base.ep > 1 && zero > 0 && base.dp == 1) break;
      for (int rc = 0; rc <= 1; ++rc) {
        PlanOptions o = base;
        o.zero = zero;
        o.recompute = rc == 1;
        nlohmann::json cost;
        try {
          cost = cost_json(c, o, cl, &plan);
        } catch (const Error&) {
          ++rejected["not a valid layout for this model"];
          continue;
        }
        ++evaluated;
        nlohmann::json row = {{"layout", layout_json(o)},   {"step_s", cost["step_s"]},
                              {"tokens_per_s", cost["tokens_per_s"]}, {"mfu", cost["mfu"]},
                              {"peak_bytes", cost["peak_bytes"]}, {"time", cost["time"]}};
        if (!cost["fits"].get<bool>()) {
          if (rc == 0) continue;  // try it with recompute
          ++rejected["does not fit a device's memory"];
          if (smallest.is_null() || row["peak_bytes"].get<double>() < smallest["peak_bytes"].get<double>())
            smallest = row;
          continue;
        }
        fitting.push_back(row);
        break;  // it fits without recompute: recomputing would only be slower
      }
    }
  };
  for (int64_t tp : divisors(std::min(devices, cl.devices_per_host))) {
    if (c.n_head % tp || c.d_ff % tp || (c.n_kv_head % tp && tp % c.n_kv_head)) {
      ++rejected["tp does not split the heads or the MLP"];
      continue;
    }
    // The axis a layout adds beside tp: ep for a mixture of experts (its experts split, each
    // rank routing its own rows), cp for a dense model (every sequence split in 2 cp chunks).
    for (int64_t x : divisors(devices / tp)) {
      const int64_t ep = c.moe() ? x : 1, cp = c.moe() ? 1 : x;
      if (ep > 1 && c.n_experts % ep) continue;
      if (cp > 1 && T % (2 * cp)) continue;
      for (int64_t pp : divisors(devices / tp / x)) {
        if (pp > c.n_layer) continue;
        const int64_t dp = devices / tp / x / pp;
        if (so.global_batch % (dp * ep)) {
          ++rejected["global batch does not split over dp"];
          continue;
        }
        const int64_t per_dp = so.global_batch / dp / ep;  // sequences per data-parallel rank
        for (int64_t mb : divisors(per_dp)) {
          if ((mb & (mb - 1)) != 0 || mb > 64) continue;  // micro-batches of 1, 2, 4 ... 64 sequences
          const int64_t M = per_dp / mb;
          if (pp > 1 && M * pp > 65536) continue;
          std::vector<std::pair<std::string, int>> schedules = {{"1f1b", 1}};
          if (pp > 1) {  // (GPipe: 1F1B's bubble with more activations alive; never ahead)
            schedules.push_back({"zb-h1", 1});
            if (M % pp == 0 && c.n_layer >= 2 * pp) schedules.push_back({"interleaved", 2});
          }
          for (const auto& [sched, v] : schedules) {
            for (int sp = 0; sp <= (tp > 1 ? 1 : 0); ++sp) {
              // The formulas' part of the plan, the same for every ZeRO stage and recompute.
              PlanOptions base;
              base.dp = dp, base.tp = tp, base.pp = pp, base.pp_schedule = sched, base.virtual_stages = v;
              base.ep = ep, base.cp = cp, base.expert_load = ep > 1 ? so.expert_load : 0.0;
              base.expert_load_peak = ep > 1 ? so.expert_load_peak : 0.0;
              base.sequence_parallel = sp == 1, base.micro_batch = mb, base.accumulation = M, base.seq_len = so.seq_len;
              base.timeline = false;
              base.in_process = false;  // a process per device
              nlohmann::json plan;
              try {
                plan = plan_json(c, base);
              } catch (const Error&) {
                ++rejected["not a valid layout for this model"];
                continue;
              }
              cost_stages(base, plan);
            }
          }
        }
      }
    }
  }
  auto ranked = [&](nlohmann::json rows) {
    std::sort(rows.begin(), rows.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
      return a["step_s"].get<double>() < b["step_s"].get<double>();
    });
    nlohmann::json best = nlohmann::json::array();
    for (size_t i = 0; i < rows.size() && static_cast<int64_t>(i) < so.top; ++i) {
      nlohmann::json row = rows[i];
      row["loses_by"] = i == 0 ? "-" : loses_by(row, rows[0]);
      best.push_back(row);
    }
    return best;
  };
  const nlohmann::json best = ranked(fitting);
  nlohmann::json rej = nlohmann::json::object();
  for (const auto& [k, v] : rejected) rej[k] = v;
  nlohmann::json out = {{"cluster", cl.name},      {"devices", devices},        {"global_batch", so.global_batch},
                        {"evaluated", evaluated},  {"fitting", fitting.size()}, {"rejected", rej},
                        {"best", best},            {"device_memory", cl.device_memory}};
  if (fitting.empty() && !smallest.is_null()) out["smallest_that_does_not_fit"] = smallest;
  return out;
}

}  // namespace dt::engine
