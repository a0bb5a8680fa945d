// bench_plan_serve: the serving planner (engine/plan_serve.h) against the serving engine on
// this machine. For each model, layout (1 rank, 2 replicas, tp 2, pp 2) and batch of running
// sequences, the engine serves `batch` requests a replica (prompt P random tokens, O
// generated) and the bench times
//   the decode step   the median engine step once every prompt is prefilled (every running
//                     sequence decodes a token): against the planner's time.step_s
//   the first token   a lone request's prompt prefilled to its first token: against ttft_s
// with the planner on this machine calibrated (engine/calibrate.h, a few seconds; or
// --cluster FILE from dtrain plan --calibrate). Each configuration runs in two interleaved
// passes and the faster is kept (the machine is shared). Prints the table, the errors'
// mean, median and worst, how many are within 10% and 20%, and per model and batch the
// Kendall tau between the layouts' ranking by predicted and by measured tokens per second.
// Exits 0 whatever the figures (DESIGN.md section 7).
//   bench_plan_serve [--quick] [--cluster FILE] [--batches 1,4,16] [--prompt 64] [--output 32] [--filter LAYOUT]
//                    [--json PATH]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "comm/mesh.h"
#include "common/bench_util.h"
#include "engine/calibrate.h"
#include "engine/plan_serve.h"
#include "nn/gpt.h"
#include "parallel/layout.h"
#include "serve/engine.h"

namespace dt::bench {
namespace {

struct Model {
  std::string name;
  nn::GPTConfig cfg;
};

std::vector<Model> models(bool quick) {
  std::vector<Model> m;
  nn::GPTConfig gpt = nn::gpt_preset("gpt-small")->resolved();
  m.push_back({"gpt-small", gpt});
  if (quick) return m;
  nn::GPTConfig llama = nn::gpt_preset("llama-tiny")->resolved();
  llama.n_layer = 8, llama.d_model = 512, llama.n_head = 8, llama.n_kv_head = 2, llama.d_ff = 1408;
  llama.vocab_size = 4096, llama.context = 512;
  m.push_back({"llama-8x512", llama.resolved()});
  return m;
}

struct Layout {
  std::string name;
  int64_t replicas, tp, pp;
};
const Layout kLayouts[] = {{"1 rank", 1, 1, 1}, {"2 replicas", 2, 1, 1}, {"tp 2", 1, 2, 1}, {"pp 2", 1, 1, 2}};

struct Measured {
  double step_s = 0, ttft_s = 0;
};

// Serves `batch` requests a replica to the end, timing each engine step; then a lone request.
Measured measure(const nn::GPTConfig& cfg, const Layout& l, int64_t batch, int64_t P, int64_t O, int64_t chunk) {
  nn::GPT model(cfg);
  std::shared_ptr<comm::Mesh> mesh;
  std::unique_ptr<parallel::Layout> layout;
  const int64_t world = l.replicas * l.tp * l.pp;
  if (world > 1) {
    comm::BackendOptions bo;
    bo.timeout_s = 120;
    mesh = comm::Mesh::create("local", {static_cast<int>(l.replicas), static_cast<int>(l.pp), 1, 1, static_cast<int>(l.tp)}, bo);
    layout = std::make_unique<parallel::Layout>(mesh, model, parallel::LayoutOptions{});
  }
  serve::EngineConfig ec;
  ec.block_size = 16;
  ec.num_blocks = batch * ((P + O + 15) / 16) + 8;
  ec.max_num_seqs = batch;
  ec.max_batched_tokens = chunk;
  ec.prefix_caching = false;
  serve::ServingEngine e(layout ? serve::layout_runner(*layout) : serve::single_model_runner(model), ec);
  std::mt19937_64 rng(7);
  auto prompt = [&] {
    std::vector<int32_t> p(static_cast<size_t>(P));
    for (auto& t : p) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(cfg.vocab_size));
    return p;
  };
  serve::SamplingParams sp;
  sp.max_tokens = O;
  std::vector<serve::Event> ev;
  const int64_t n = batch * l.replicas;
  for (int64_t i = 0; i < n; ++i) e.add(i, prompt(), sp, ev);
  std::map<int64_t, int64_t> got;
  std::vector<double> decode;
  while (!e.idle()) {
    const bool all_started = static_cast<int64_t>(got.size()) == n;
    ev.clear();
    const double t0 = now_s();
    e.step(ev);
    const double dt = now_s() - t0;
    int64_t finished = 0;
    for (const serve::Event& x : ev) {
      if (x.token >= 0) ++got[x.id];
      finished += x.done ? 1 : 0;
    }
    // A step that began with every sequence decoding, none ending in it (the last steps
    // sample fewer rows as sequences finish).
    if (all_started && finished == 0) decode.push_back(dt);
  }
  Measured m;
  m.step_s = decode.empty() ? 0.0 : median(decode);
  // A lone request: its prompt's chunks to its first token (the best of three).
  m.ttft_s = 1e300;
  for (int rep = 0; rep < 3; ++rep) {
    ev.clear();
    const double t0 = now_s();
    e.add(1000 + rep, prompt(), sp, ev);
    bool first = false;
    while (!first) {
      e.step(ev);
      for (const serve::Event& x : ev) first = first || x.token >= 0;
    }
    m.ttft_s = std::min(m.ttft_s, now_s() - t0);
    std::vector<int64_t> live = e.live_ids();
    for (int64_t id : live) e.abort(id, ev);
  }
  return m;
}

double kendall_tau(const std::vector<double>& a, const std::vector<double>& b) {
  double concordant = 0, discordant = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = i + 1; j < a.size(); ++j) {
      const double s = (a[i] - a[j]) * (b[i] - b[j]);
      concordant += s > 0 ? 1 : 0;
      discordant += s < 0 ? 1 : 0;
    }
  const double pairs = static_cast<double>(a.size() * (a.size() - 1) / 2);
  return pairs > 0 ? (concordant - discordant) / pairs : 0.0;
}

}  // namespace
}  // namespace dt::bench

int main(int argc, char** argv) {
  using namespace dt;
  using namespace dt::bench;
  const Options o = parse_args(argc, argv, "bench_plan_serve [--quick] [--cluster FILE] [--batches 1,4,16] [--prompt 64] [--output 32] [--filter LAYOUT] "
                               "[--json PATH]",
                               {"cluster", "batches", "prompt", "output"});
  const std::string cluster_file = option_value(o, "cluster", "");
  engine::Cluster cl;
  if (!cluster_file.empty()) {
    std::ifstream in(cluster_file);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (!in || j.is_discarded()) {
      std::fprintf(stderr, "bench_plan_serve: --cluster %s: not a readable cluster JSON\n", cluster_file.c_str());
      return 2;
    }
    cl = engine::cluster_from_json(j, cluster_file);
  } else {
    std::fprintf(stderr, "calibrating this machine (a few seconds)...\n");
    cl = engine::calibrate_local([](const std::string& s) { std::fprintf(stderr, "  %s\n", s.c_str()); });
  }
  const int64_t P = std::stoll(option_value(o, "prompt", "64")), O = std::stoll(option_value(o, "output", o.quick ? "16" : "32"));
  const int64_t chunk = 256;
  std::vector<int64_t> batches = o.quick ? std::vector<int64_t>{1, 8} : std::vector<int64_t>{1, 4, 16};
  if (const std::string b = option_value(o, "batches", ""); !b.empty()) {
    batches.clear();
    for (size_t i = 0; i < b.size();) {
      size_t j = b.find(',', i);
      if (j == std::string::npos) j = b.size();
      batches.push_back(std::stoll(b.substr(i, j - i)));
      i = j + 1;
    }
  }
  struct Row {
    std::string model, layout;
    int64_t batch;
    double pred_step, meas_step, pred_ttft, meas_ttft, pred_tps, meas_tps;
  };
  std::vector<Row> rows;
  const std::vector<Model> ms = models(o.quick);
  const int passes = o.quick ? 1 : 2;
  int layouts = 0;
  for (const Layout& l : kLayouts) layouts += selected(o, l.name) ? 1 : 0;
  const int total = static_cast<int>(ms.size() * batches.size()) * layouts * passes;
  int done = 0;
  for (const Model& m : ms)
    for (int64_t b : batches)
      for (const Layout& l : kLayouts) {
        if (!selected(o, l.name)) continue;
        engine::ServePlanOptions so;
        so.replicas = l.replicas, so.tp = l.tp, so.pp = l.pp, so.batch = b;
        so.prompt = P, so.output = O, so.max_batched_tokens = chunk, so.max_num_seqs = b;
        const nlohmann::json p = engine::serve_cost_json(m.cfg, so, cl);
        Row r{m.name, l.name, b, p["time"]["step_s"].get<double>(), 1e300, p["ttft_s"].get<double>(), 1e300, 0, 0};
        rows.push_back(r);
      }
  // Interleaved passes: every configuration once, then again; the faster of each kept.
  for (int pass = 0; pass < passes; ++pass) {
    size_t i = 0;
    for (const Model& m : ms)
      for (int64_t b : batches)
        for (const Layout& l : kLayouts) {
          if (!selected(o, l.name)) continue;
          Row& r = rows[i++];
          progress("plan_serve", ++done, total, m.name + " " + l.name + " batch " + std::to_string(b));
          const Measured got = measure(m.cfg, l, b, P, O, chunk);
          r.meas_step = std::min(r.meas_step, got.step_s);
          r.meas_ttft = std::min(r.meas_ttft, got.ttft_s);
          r.pred_tps = static_cast<double>(l.replicas * b) / r.pred_step;
          r.meas_tps = static_cast<double>(l.replicas * b) / r.meas_step;
        }
  }
  Report rep("bench_plan_serve");
  rep.meta().str("cluster", cl.name).num("prompt", static_cast<double>(P)).num("output", static_cast<double>(O));
  rep.meta().str("load_average", load_average());
  std::printf("bench_plan_serve: predicted (on %s) against measured, prompt %lld, output %lld; load %s\n",
              cl.name.c_str(), static_cast<long long>(P), static_cast<long long>(O), load_average().c_str());
  std::printf("%-12s %-11s %5s | %10s %10s %8s | %10s %10s %8s\n", "model", "layout", "batch", "step pred", "measured",
              "error", "TTFT pred", "measured", "error");
  std::vector<double> errors;
  for (const Row& r : rows) {
    const double es = r.pred_step / r.meas_step - 1, et = r.pred_ttft / r.meas_ttft - 1;
    errors.push_back(std::fabs(es));
    errors.push_back(std::fabs(et));
    std::printf("%-12s %-11s %5lld | %8.2f ms %8.2f ms %+7.1f%% | %8.2f ms %8.2f ms %+7.1f%%\n", r.model.c_str(),
                r.layout.c_str(), static_cast<long long>(r.batch), 1e3 * r.pred_step, 1e3 * r.meas_step, 100 * es,
                1e3 * r.pred_ttft, 1e3 * r.meas_ttft, 100 * et);
    rep.add("configurations", r.model + " " + r.layout + " batch " + std::to_string(r.batch))
        .str("model", r.model)
        .str("layout", r.layout)
        .num("batch", static_cast<double>(r.batch))
        .num("predicted_step_s", r.pred_step)
        .num("measured_step_s", r.meas_step)
        .num("predicted_ttft_s", r.pred_ttft)
        .num("measured_ttft_s", r.meas_ttft);
  }
  std::vector<double> sorted = errors;
  std::sort(sorted.begin(), sorted.end());
  double mean = 0;
  int within10 = 0, within20 = 0;
  for (double e : errors) {
    mean += e / static_cast<double>(errors.size());
    within10 += e <= 0.10 ? 1 : 0;
    within20 += e <= 0.20 ? 1 : 0;
  }
  const double med = median(errors), worst = sorted.back();
  std::printf("\n%zu predictions (decode step and first token): mean |error| %.1f%%, median %.1f%%, worst %.1f%%; "
              "%d within 10%%, %d within 20%%\n",
              errors.size(), 100 * mean, 100 * med, 100 * worst, within10, within20);
  // Per model and batch: do the layouts rank by tokens/s as measured?
  for (const Model& m : ms)
    for (int64_t b : batches) {
      std::vector<double> pred, meas;
      for (const Row& r : rows)
        if (r.model == m.name && r.batch == b) pred.push_back(r.pred_tps), meas.push_back(r.meas_tps);
      const double tau = kendall_tau(pred, meas);
      std::printf("  %s batch %lld: Kendall tau of the layouts by tokens/s %.2f\n", m.name.c_str(),
                  static_cast<long long>(b), tau);
      rep.add("ranking", m.name + " batch " + std::to_string(b)).num("kendall_tau", tau);
    }
  rep.add("summary", "errors")
      .num("mean_abs_error", mean)
      .num("median_abs_error", med)
      .num("worst_abs_error", worst)
      .num("within_10_percent", within10)
      .num("within_20_percent", within20)
      .num("predictions", static_cast<double>(errors.size()));
  if (!o.json_path.empty() && !rep.write(o.json_path)) return 1;
  return 0;
}
