#include "engine/plan_serve.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "engine/plan.h"
#include "engine/plan_rates.h"

namespace dt::engine {
namespace {

using rates::Rates;

struct ServeStage {
  int blocks = 0;
  bool embed = true, head = true;
  double params = 0, tied_copy = 0;
};

// The time of a step's pieces on one rank, as the JSON reports them.
// staging: the CPU paged attention's copies of cached rows (kv_row_s, measured by itself:
// the efficiencies do not scale it).
struct StepTime {
  double gemm = 0, attention = 0, elementwise = 0, tp = 0, staging = 0;
  double total() const { return gemm + attention + elementwise + tp + staging; }
  StepTime scaled(double f) const { return {gemm * f, attention * f, elementwise * f, tp, staging}; }
  StepTime& operator+=(const StepTime& o) {
    gemm += o.gemm, attention += o.attention, elementwise += o.elementwise, tp += o.tp, staging += o.staging;
    return *this;
  }
};

class ServeModel {
 public:
  ServeModel(const nn::GPTConfig& raw, const ServePlanOptions& o, const Cluster& cl) : o_(o), cl_(cl) {
    const nn::GPTConfig c = raw.resolved();
    PlanOptions po;
    po.dp = o.replicas, po.tp = o.tp, po.pp = o.pp;
    po.accumulation = o.pp, po.pp_schedule = "gpipe", po.timeline = false;
    po.seq_len = std::min<int64_t>(c.context, o.prompt + o.output);
    const nlohmann::json plan = plan_json(raw, po);  // validates the split (heads, vocabulary, stages)
    if (o.pp > 1) {
      for (const nlohmann::json& st : plan["pipeline"]["stages"])
        stages_.push_back({st["blocks"].get<int>(), st["embedding"].get<bool>(), st["head"].get<bool>(),
                           st["params"].get<double>(), st["tied_copy_params"].get<double>()});
    } else {
      stages_.push_back({static_cast<int>(c.n_layer), true, true, plan["params_per_tp_rank"].get<double>(), 0.0});
    }
    const int64_t world = o.replicas * o.tp * o.pp;
    r_ = rates::rank_rates(cl, c.dtype != DType::F32, world);
    s_ = rates::widths_of(c, o.tp);
    shared_ = cl.cpu && static_cast<double>(world) > static_cast<double>(cl.devices_per_host);
    cores_ = static_cast<double>(cl.devices_per_host);
    world_ = static_cast<double>(world);
    tp_link_ = &rates::link_of(cl, 1, o.tp, o.in_process);
    pp_link_ = &rates::link_of(cl, o.tp, o.pp, o.in_process);
  }

  // A step of `n` token rows of `seqs` sequences (decode: a row each; prefill: a chunk of
  // one) through stage `st`, whose sequences' keys reach `ctx` positions on average
  // (attention reads each sequence's cached keys and values once; causal prefill's tokens
  // see `ctx` positions on average). The head computes `rows` rows of logits (decode: one
  // per sequence; a prefill chunk: its last token's). marginal: only what the rows add to a
  // step that runs anyway (a prefill chunk batched with decoding sequences: its FLOPs and
  // bytes, not the weights' read or the kernels' calls, which the step pays once).
  StepTime stage(size_t st, double n, double seqs, double ctx, double rows, bool marginal = false) const {
    const ServeStage& g = stages_[st];
    StepTime t;
    const double C = s_.C, e = s_.e;
    for (int b = 0; b < g.blocks; ++b) {
      t.gemm += mm(n, C, s_.q, marginal) + 2.0 * mm(n, C, s_.kv, marginal) + mm(n, s_.q, C, marginal) +
                (s_.swiglu ? 2.0 : 1.0) * mm(n, C, s_.F, marginal) + mm(n, s_.F, C, marginal);
      // Attention reads each sequence's cached keys and values (its own), and computes
      // q.k and p.v over them: the larger of the two, and the cache write.
      const double flops = 4.0 * n * ctx * s_.q, bytes = 2.0 * seqs * ctx * s_.kv * e;
      // The kernel's staging of each query head's cached rows (per tile of 64 queries).
      const double staged = seqs * std::ceil(n / seqs / 64.0) * s_.hq * ctx * cl_.kv_row_s / r_.core_speed;
      t.staging += staged;
      t.attention += marginal ? flops / r_.attn
                              : std::max(flops / r_.attn, bytes / r_.bw) + rates::stream(r_, 2.0 * n * s_.kv * e, 2);
      t.elementwise += rates::stream(r_, 10.0 * n * C * e, marginal ? 0 : (s_.rope ? 8 : 6)) +
                       rates::activation_s(r_, s_, n, false) + rates::rope_s(r_, s_, n, false);
      if (o_.tp > 1) t.tp += 2.0 * all_reduce(n * C * e, marginal);
    }
    if (g.embed) t.elementwise += rates::stream(r_, (s_.learned ? 4.0 : 2.0) * n * C * e, s_.learned ? 3 : 1);
    if (g.head) {
      t.gemm += mm(rows, C, s_.Vl, marginal);
      t.elementwise += rates::stream(r_, 2.0 * rows * C * e + rows * s_.V * 4.0, 3);
      if (o_.tp > 1) {
        const double tp = static_cast<double>(o_.tp);
        t.tp += (marginal ? 0.0 : tp_link_->latency) + (tp - 1) / tp * rows * s_.V * 4.0 / tp_link_->gather_bw();
      }
    }
    return t;
  }

  // One decode step of `b` running sequences on a replica (ctx: their mean position).
  nlohmann::json decode(double b, double ctx) const {
    const double P = static_cast<double>(o_.pp), G = std::min(b, P), n = std::ceil(b / G);
    StepTime sum;
    double first_pass = 0, slowest_total = 0, work = 0;
    for (size_t st = 0; st < stages_.size(); ++st) {
      const StepTime t = stage(st, n, n, ctx, n).scaled(1.0 / cl_.decode_efficiency);
      sum += t;
      first_pass += t.total();
      slowest_total = std::max(slowest_total, t.total());
      work += G * t.total() * static_cast<double>(o_.tp);
    }
    // The first group goes through every stage, the others follow at the slowest stage's
    // pace; each crossing is a message of the group's hidden states.
    const double hop = P > 1 ? pp_link_->latency + n * s_.C * s_.e / pp_link_->p2p_bw() : 0.0;
    double step = first_pass + (G - 1.0) * slowest_total + (P - 1.0) * hop;
    // The leader samples every sequence's token from its f32 logits (a few passes over them).
    const double sampling = rates::stream(r_, 4.0 * b * s_.V * 4.0, static_cast<int>(b));
    step += sampling;
    work = work * static_cast<double>(o_.replicas) + sampling;
    const double busy = shared_ ? work / cores_ : 0.0;
    const double shared_extra = std::max(0.0, busy - step);
    step += shared_extra;
    return {{"step_s", step},
            {"gemm_s", G * sum.gemm / P},
            {"attention_s", G * (sum.attention + sum.staging) / P},
            {"elementwise_s", G * sum.elementwise / P},
            {"tp_comm_s", G * sum.tp / P},
            {"pp_s", P > 1 ? step - sampling - shared_extra - G * sum.total() / P : 0.0},
            {"sampling_s", sampling},
            {"shared_cores_extra_s", shared_extra}};
  }

  // A prompt of `len` tokens prefilled in chunks of max_batched_tokens, each through every
  // stage in turn (a lone request: nothing to overlap with); and what it adds to a running
  // replica's steps when batched with their decoding sequences (the busiest stage's
  // marginal time).
  std::pair<double, double> prefill(double len) const {
    const double chunk = static_cast<double>(o_.max_batched_tokens);
    double latency = 0, busiest = 0, done = 0;
    while (done < len) {
      const double n = std::min(chunk, len - done);
      const double ctx = done + n / 2.0;
      double worst = 0;
      for (size_t st = 0; st < stages_.size(); ++st) {
        const double eff = 1.0 / cl_.prefill_efficiency;
        latency += stage(st, n, 1.0, ctx, 1.0).scaled(eff).total();
        worst = std::max(worst, stage(st, n, 1.0, ctx, 1.0, true).scaled(eff).total());
      }
      if (o_.pp > 1) latency += static_cast<double>(o_.pp - 1) * (pp_link_->latency + n * s_.C * s_.e / pp_link_->p2p_bw());
      busiest += worst;
      done += n;
    }
    latency += rates::stream(r_, 4.0 * s_.V * 4.0, 1);
    if (shared_) latency *= world_ / cores_;  // every rank's work on the host's cores
    return {latency, busiest};
  }

  // Per rank of a replica (one per stage; tp parts are alike): weights, the KV cache of one
  // sequence, the workspace of a step.
  struct Memory {
    double weights, kv_per_seq, workspace;
  };
  Memory memory(size_t st, double b) const {
    const ServeStage& g = stages_[st];
    const double positions = std::ceil(static_cast<double>(o_.prompt + o_.output) / static_cast<double>(o_.block_size)) *
                             static_cast<double>(o_.block_size);
    const double tokens = std::max(static_cast<double>(o_.max_batched_tokens), b);
    const double act = tokens * s_.e * (3.0 * s_.C + s_.q + 2.0 * s_.kv + (s_.swiglu ? 3.0 : 2.0) * s_.F);
    const double logits = g.head ? b * s_.Vl * s_.e + b * s_.V * 4.0 * (o_.tp > 1 ? 2.0 : 1.0) : 0.0;
    return {(g.params + g.tied_copy) * s_.e, 2.0 * g.blocks * s_.kv * s_.e * positions, act + logits};
  }

  size_t stages() const { return stages_.size(); }

 private:
  // A GEMM of a step: the larger of its compute and its weights' read (decode's few rows
  // reuse each weight a few times only).
  // marginal: its FLOPs alone (at its size's rate): the weights are read for the step anyway.
  double mm(double m, double k, double n, bool marginal = false) const {
    if (marginal) return rates::gemm(r_, m, k, n) - r_.mm_call;
    return std::max(rates::gemm(r_, m, k, n), k * n * s_.e / r_.bw + r_.mm_call);
  }
  double all_reduce(double bytes, bool marginal = false) const {
    const double tp = static_cast<double>(o_.tp);
    return rates::comm(*tp_link_, 2.0 * (tp - 1) / tp * bytes, marginal ? 0 : 1);
  }

  ServePlanOptions o_;
  const Cluster& cl_;
  std::vector<ServeStage> stages_;
  Rates r_;
  double cores_ = 1, world_ = 1;
  bool shared_ = false;
  rates::Widths s_;
  const Link* tp_link_ = nullptr;
  const Link* pp_link_ = nullptr;
};

nlohmann::json layout_of(const ServePlanOptions& o) {
  return {{"replicas", o.replicas}, {"tp", o.tp}, {"pp", o.pp}};
}

}  // namespace

void ServePlanOptions::check(const nn::GPTConfig& cfg) const {
  auto range = [](const char* name, int64_t v, int64_t lo, int64_t hi) {
    DT_CHECK(v >= lo && v <= hi, std::string(name) + " = " + std::to_string(v) + "; accepted: " + std::to_string(lo) +
                                     " to " + std::to_string(hi));
  };
  range("replicas", replicas, 1, 1 << 20);
  range("tp", tp, 1, 1024);
  range("pp", pp, 1, 1024);
  range("prompt", prompt, 1, cfg.context);
  range("output", output, 1, cfg.context);
  DT_CHECK(prompt + output <= cfg.context, "prompt + output = " + std::to_string(prompt + output) +
                                               " tokens; accepted: at most the model's context (" +
                                               std::to_string(cfg.context) + ")");
  range("batch", batch, 0, 1 << 20);
  range("max_num_seqs", max_num_seqs, 1, 1 << 20);
  range("max_batched_tokens", max_batched_tokens, 0, 1 << 24);
  range("block_size", block_size, 1, 4096);
  range("top", top, 1, 1000);
  DT_CHECK(memory_fraction > 0 && memory_fraction <= 1,
           "memory_fraction = " + std::to_string(memory_fraction) + "; accepted: more than 0, at most 1");
  DT_CHECK(itl_target_s >= 0 && std::isfinite(itl_target_s),
           "itl_target = " + std::to_string(itl_target_s) + " s; accepted: 0 (none) or more");
  DT_CHECK(ttft_target_s >= 0 && std::isfinite(ttft_target_s),
           "ttft_target = " + std::to_string(ttft_target_s) + " s; accepted: 0 (none) or more");
}

nlohmann::json serve_cost_json(const nn::GPTConfig& raw, const ServePlanOptions& o, const Cluster& cl) {
  cl.check();
  o.check(raw.resolved());
  DT_CHECK(!raw.resolved().moe(), "the serving cost model covers dense models; accepted: experts = 0");
  const int64_t world = o.replicas * o.tp * o.pp;
  DT_CHECK(cl.cpu || world <= cl.devices(), "replicas x tp x pp = " + std::to_string(world) + " ranks on a cluster of " +
                                                std::to_string(cl.devices()) + " devices; accepted: at most that many");
  ServePlanOptions resolved = o;
  if (resolved.max_batched_tokens == 0) resolved.max_batched_tokens = cl.cpu ? 256 : 2048;
  const ServeModel m(raw, resolved, cl);
  // A rank's budget: its device's share (CPU: the ranks share the host's memory).
  const double budget = o.memory_fraction * cl.device_memory / (cl.cpu ? static_cast<double>(world) : 1.0);
  double max_b = 1e18;
  for (size_t st = 0; st < m.stages(); ++st) {
    const auto mem = m.memory(st, 1.0);
    max_b = std::min(max_b, std::floor((budget - mem.weights - mem.workspace) / mem.kv_per_seq));
  }
  const double ctx = static_cast<double>(o.prompt) + static_cast<double>(o.output) / 2.0;
  const std::pair<double, double> prefill = m.prefill(static_cast<double>(o.prompt));
  const double ttft = prefill.first, prefill_busy = prefill.second;  // a lambda below reads it (no binding)
  const int64_t chunk = resolved.max_batched_tokens;
  // The mean inter-token latency at b: a decode step plus its share of the prefills of the
  // requests that replace those finishing (b / output of them per step).
  auto itl_at = [&](double b) {
    nlohmann::json d = m.decode(b, ctx);
    const double share = b / static_cast<double>(o.output) * prefill_busy;
    d["prefill_share_s"] = share;
    d["itl_s"] = d["step_s"].get<double>() + share;
    return d;
  };
  std::string limited = "given";
  double b = static_cast<double>(o.batch);
  if (o.batch == 0) {
    const double cap = std::min(static_cast<double>(o.max_num_seqs), std::max(1.0, max_b));
    limited = max_b < static_cast<double>(o.max_num_seqs) ? "memory" : "max_num_seqs";
    b = cap;
    if (o.itl_target_s > 0 && itl_at(cap)["itl_s"].get<double>() > o.itl_target_s) {
      double lo = 1, hi = cap;  // the largest batch within the target (the latency grows with it)
      while (hi - lo > 1) {
        const double mid = std::floor((lo + hi) / 2);
        (itl_at(mid)["itl_s"].get<double>() <= o.itl_target_s ? lo : hi) = mid;
      }
      b = lo;
      limited = "itl_target";
    }
  }
  const nlohmann::json d = itl_at(b);
  const double itl = d["itl_s"].get<double>();
  nlohmann::json ranks = nlohmann::json::array();
  double peak = 0;
  for (size_t st = 0; st < m.stages(); ++st) {
    const auto mem = m.memory(st, b);
    const double total = mem.weights + b * mem.kv_per_seq + mem.workspace;
    peak = std::max(peak, total);
    ranks.push_back({{"pp_stage", st},
                     {"memory", {{"weights", mem.weights}, {"kv_cache", b * mem.kv_per_seq}, {"workspace", mem.workspace}}},
                     {"kv_bytes_per_sequence", mem.kv_per_seq},
                     {"peak_bytes", total}});
  }
  const bool fits = max_b >= 1 && peak <= budget;
  const bool meets = fits && (o.itl_target_s <= 0 || itl <= o.itl_target_s) && (o.ttft_target_s <= 0 || ttft <= o.ttft_target_s);
  const double tokens = static_cast<double>(o.replicas) * b / itl;
  return {{"cluster", cl.name},
          {"layout", layout_of(o)},
          {"batch", b},
          {"batch_limited_by", limited},
          {"max_batched_tokens", chunk},
          {"max_batch_by_memory", std::max(0.0, max_b)},
          {"itl_s", itl},
          {"ttft_s", ttft},
          {"tokens_per_s", tokens},
          {"tokens_per_s_per_device", tokens / static_cast<double>(world)},
          {"time", d},
          {"ranks", ranks},
          {"peak_bytes", peak},
          {"budget_bytes", budget},
          {"fits", fits},
          {"meets_targets", meets}};
}

namespace {

// Why a layout serves fewer tokens per second than the best: fewer sequences at once (and
// what capped them), or slower steps (and which part of the step grew most).
std::string serve_loses_by(const nlohmann::json& row, const nlohmann::json& best) {
  const double seqs = row["batch"].get<double>() * row["layout"]["replicas"].get<double>();
  const double best_seqs = best["batch"].get<double>() * best["layout"]["replicas"].get<double>();
  char buf[256];
  // tokens/s = sequences / latency: name the factor that loses more.
  if (best_seqs / seqs >= row["itl_s"].get<double>() / best["itl_s"].get<double>()) {
    std::snprintf(buf, sizeof buf, "%.0f sequences at once against %.0f (batch limited by %s)", seqs, best_seqs,
                  row["batch_limited_by"].get<std::string>().c_str());
    return buf;
  }
  const char* parts[] = {"gemm_s", "attention_s", "elementwise_s", "tp_comm_s", "pp_s", "sampling_s", "prefill_share_s",
                         "shared_cores_extra_s"};
  const char* worst = parts[0];
  double grew = -1e300;
  for (const char* p : parts) {
    const double d = row["time"][p].get<double>() - best["time"][p].get<double>();
    if (d > grew) grew = d, worst = p;
  }
  std::snprintf(buf, sizeof buf, "inter-token latency %.3g ms against %.3g ms, most of it in %.*s (+%.3g ms)",
                1e3 * row["itl_s"].get<double>(), 1e3 * best["itl_s"].get<double>(),
                static_cast<int>(std::string(worst).size() - 2), worst, 1e3 * grew);
  return buf;
}

}  // namespace

nlohmann::json serve_search_json(const nn::GPTConfig& raw, const ServePlanOptions& o, const Cluster& cl) {
  cl.check();
  const nn::GPTConfig c = raw.resolved();
  o.check(c);
  const int64_t devices = cl.devices();
  std::map<std::string, int64_t> rejected;
  nlohmann::json rows = nlohmann::json::array();
  int64_t evaluated = 0;
  for (int64_t tp = 1; tp <= std::min<int64_t>(devices, cl.devices_per_host); ++tp) {
    if (devices % tp) continue;
    for (int64_t pp = 1; pp <= devices / tp && pp <= c.n_layer; ++pp) {
      if ((devices / tp) % pp) continue;
      ServePlanOptions lo = o;
      lo.tp = tp, lo.pp = pp, lo.replicas = devices / tp / pp, lo.batch = 0;
      nlohmann::json cost;
      try {
        cost = serve_cost_json(raw, lo, cl);
      } catch (const Error&) {
        ++rejected["not a valid layout for this model"];
        continue;
      }
      ++evaluated;
      if (!cost["fits"].get<bool>()) {
        ++rejected["its weights and one sequence's KV cache do not fit a device"];
        continue;
      }
      if (!cost["meets_targets"].get<bool>()) {
        ++rejected[o.ttft_target_s > 0 && cost["ttft_s"].get<double>() > o.ttft_target_s
                       ? "a lone request's first token is later than the TTFT target"
                       : "one sequence alone is slower than the inter-token latency target"];
        continue;
      }
      cost.erase("ranks");
      rows.push_back(cost);
    }
  }
  std::sort(rows.begin(), rows.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["tokens_per_s"].get<double>() > b["tokens_per_s"].get<double>();
  });
  nlohmann::json best = nlohmann::json::array();
  for (size_t i = 0; i < rows.size() && static_cast<int64_t>(i) < o.top; ++i) {
    nlohmann::json row = rows[i];
    row["loses_by"] = i == 0 ? "-" : serve_loses_by(row, rows[0]);
    best.push_back(row);
  }
  nlohmann::json rej = nlohmann::json::object();
  for (const auto& [k, v] : rejected) rej[k] = v;
  return {{"cluster", cl.name},
          {"devices", devices},
          {"prompt", o.prompt},
          {"output", o.output},
          {"itl_target_s", o.itl_target_s},
          {"ttft_target_s", o.ttft_target_s},
          {"evaluated", evaluated},
          {"fitting", rows.size()},
          {"rejected", rej},
          {"best", best}};
}

ServeForwardTimes serve_forward_times(const nn::GPTConfig& cfg, const Cluster& cl, int64_t prompt, int64_t seqs,
                                      int64_t ctx) {
  ServePlanOptions o;
  o.prompt = prompt;
  o.output = 1;
  o.max_batched_tokens = prompt;
  const ServeModel m(cfg, o, cl);
  const nlohmann::json d = m.decode(static_cast<double>(seqs), static_cast<double>(ctx));
  const nn::GPTConfig c = cfg.resolved();
  ServeForwardTimes t;
  t.prefill_s = m.prefill(static_cast<double>(prompt)).first;
  t.decode_s = d["step_s"].get<double>() - d["sampling_s"].get<double>();
  t.kv_rows = static_cast<double>(seqs * c.n_layer * c.n_head * ctx);
  return t;
}

}  // namespace dt::engine
