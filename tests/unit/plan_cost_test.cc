// The training cost model (engine/plan_cost.h) with expert and context parallelism: ep
// holds a share of the experts (the rest of the model whole) and adds the all-to-all; cp
// holds a share of every sequence's activations and adds the ring; both are searched by
// --auto; combinations the engine refuses are refused by name. bench/bench_plan.py holds the
// predictions to measurement on this machine; cli_test.sh holds peaks to the ledger.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/cluster.h"
#include "engine/plan.h"
#include "engine/plan_cost.h"
#include "engine/plan_rates.h"
#include "engine/plan_search.h"
#include "nn/config.h"

namespace dt {
namespace DT_TEST_NS {

// A Mixtral-like shape at a small scale (8 experts of SwiGLU 4096, top 2), bf16.
nn::GPTConfig moe() {
  nn::GPTConfig c;
  c.vocab_size = 32000, c.context = 4096, c.n_layer = 8, c.n_head = 16, c.n_kv_head = 4, c.d_model = 2048;
  c.d_ff = 4096, c.n_experts = 8, c.top_k = 2;
  c.norm = nn::NormKind::RMSNorm, c.pos = nn::PosKind::RoPE, c.act = nn::Act::SwiGLU;
  c.tied_embeddings = false, c.bias = false, c.dtype = DType::BF16;
  return c;
}

nn::GPTConfig dense() {
  nn::GPTConfig c = moe();
  c.n_experts = 0, c.d_ff = 8192, c.context = 32768;
  return c;
}

engine::PlanOptions layout(int64_t dp, int64_t ep, int64_t cp, int64_t mb) {
  engine::PlanOptions o;
  o.dp = dp, o.ep = ep, o.cp = cp, o.micro_batch = mb, o.timeline = false, o.in_process = false;
  return o;
}

TEST(PlanCost, ExpertParallelRanksHoldTheirShareOfTheExperts) {
  const nn::GPTConfig c = moe();
  const engine::Cluster h100 = engine::builtin_cluster("h100-node");
  const nlohmann::json one = engine::cost_json(c, layout(2, 1, 1, 1), h100);
  const nlohmann::json two = engine::cost_json(c, layout(1, 2, 1, 1), h100);
  const double experts = 8.0 * 8.0 * 3.0 * 2048.0 * 4096.0;  // blocks x experts x three SwiGLU matrices
  EXPECT_DOUBLE_EQ(one["ranks"][0]["memory"]["param"].get<double>() - two["ranks"][0]["memory"]["param"].get<double>(),
                   2.0 * experts / 2.0);
  // The same rows per rank (ep ranks route their own), the all-to-all only under ep.
  EXPECT_DOUBLE_EQ(one["tokens_per_s"].get<double>() * one["step_s"].get<double>(),
                   two["tokens_per_s"].get<double>() * two["step_s"].get<double>());
  EXPECT_EQ(one["time"]["ep_comm_s"].get<double>(), 0.0);
  EXPECT_GT(two["time"]["ep_comm_s"].get<double>(), 0.0);
  try {
    engine::PlanOptions o = layout(1, 2, 1, 1);
    o.zero = 1;
    engine::cost_json(c, o, h100);
    FAIL() << "zero 1 with ep and dp 1 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("zero = 1 with ep = 2 and dp = 1"), std::string::npos) << e.what();
  }
}

// A router that sends the busiest ep rank more than an even share (the load --report
// measures) costs that rank the experts' activations and work of its rows: the experts'
// activation bytes grow by the load (nothing else does), the step by the busiest rank's
// expert work. Unstated is an even share; the rows are bounded by every rank's.
TEST(PlanCost, ExpertLoadSizesTheBusiestRanksRows) {
  const nn::GPTConfig c = moe();
  const engine::Cluster h100 = engine::builtin_cluster("h100-node");
  engine::PlanOptions o = layout(1, 2, 1, 1);
  const nlohmann::json even = engine::cost_json(c, o, h100);
  o.expert_load = 1.0;
  EXPECT_EQ(engine::cost_json(c, o, h100)["peak_bytes"], even["peak_bytes"]);
  o.expert_load = 1.5;
  const nlohmann::json busy = engine::cost_json(c, o, h100);
  // The experts' rows: R = 4096 tokens x top 2 received; SwiGLU keeps 6 [rows, d_ff] tensors
  // and ep 5 [rows, d_model] (received, outputs, their gradients, the staging), bf16, 8 blocks.
  const double rows = 4096.0 * 2.0, per_row = (6.0 * 4096.0 + 5.0 * 2048.0) * 2.0 * 8.0;
  EXPECT_NEAR(busy["ranks"][0]["memory"]["activation"].get<double>() - even["ranks"][0]["memory"]["activation"].get<double>(),
              0.5 * rows * per_row, 1e-6 * rows * per_row);
  EXPECT_GT(busy["step_s"].get<double>(), even["step_s"].get<double>());
  EXPECT_EQ(busy["ranks"][0]["memory"]["param"], even["ranks"][0]["memory"]["param"]);
  o.expert_load = 1000;  // more than every rank's rows: capped at them
  o.ep = 2;
  const nlohmann::json all = engine::cost_json(c, o, h100);
  o.expert_load = 2;
  EXPECT_EQ(all["peak_bytes"], engine::cost_json(c, o, h100)["peak_bytes"]);
}

TEST(PlanCost, ContextParallelRanksHoldTheirShareOfTheActivations) {
  const nn::GPTConfig c = dense();
  const engine::Cluster h100 = engine::builtin_cluster("h100-node");
  const nlohmann::json one = engine::cost_json(c, layout(1, 1, 1, 1), h100);
  const nlohmann::json four = engine::cost_json(c, layout(1, 1, 4, 1), h100);
  const double a1 = one["ranks"][0]["memory"]["activation"].get<double>();
  const double a4 = four["ranks"][0]["memory"]["activation"].get<double>();
  EXPECT_NEAR(a4 / a1, 0.25, 0.01);
  // Attention's quadratic work splits over the ring: four ranks take well under half the
  // step, and the ring's transfers hide under attention at this length.
  EXPECT_LT(four["step_s"].get<double>(), 0.5 * one["step_s"].get<double>());
  EXPECT_LT(four["time"]["cp_comm_exposed_s"].get<double>(), 0.01 * four["step_s"].get<double>());
}

TEST(PlanCost, TheSearchTriesExpertAndContextParallelism) {
  const engine::Cluster h100 = engine::builtin_cluster("h100-node");
  engine::SearchOptions so;
  so.global_batch = 16;
  so.top = 1000;
  auto axis_seen = [&](const nn::GPTConfig& c, const char* axis) {
    const nlohmann::json s = engine::search_json(c, so, h100);
    for (const auto& r : s["best"])
      if (r["layout"].contains(axis)) return true;
    return false;
  };
  EXPECT_TRUE(axis_seen(moe(), "ep"));
  so.seq_len = 32768;
  EXPECT_TRUE(axis_seen(dense(), "cp"));
  // 32 blocks' activations of a sequence this long do not fit an H100 whole (about 90 GB):
  // the best layout splits the sequence (cp, or tp with SP) or recomputes.
  nn::GPTConfig deep = dense();
  deep.n_layer = 32;
  const nlohmann::json s = engine::search_json(deep, so, h100);
  const nlohmann::json& best = s["best"][0]["layout"];
  EXPECT_TRUE(best.contains("cp") || best["recompute"].get<bool>() || best["tp"].get<int64_t>() > 1) << best.dump();
}

// Ranks sharing cores (engine/plan_rates.h): even work ends at its total over the cores; an
// uneven share ends later, since the busiest gets a core alone only once the rest are done.
TEST(PlanCost, SharedCoresMakespan) {
  EXPECT_DOUBLE_EQ(engine::rates::shared_makespan({1, 1, 1, 1}, 2), 2.0);
  EXPECT_DOUBLE_EQ(engine::rates::shared_makespan({3, 1}, 2), 3.0);  // no more ranks than cores
  // 4 ranks on 2 cores, one with 1.75x an even share, three with 0.75x: all at half speed
  // until t = 1.5, then the busiest alone at full speed for its last 1.0.
  EXPECT_DOUBLE_EQ(engine::rates::shared_makespan({1.75, 0.75, 0.75, 0.75}, 2), 2.5);
}

TEST(PlanCost, UnevenExpertsOnSharedCoresAndRecomputeRatio) {
  nn::GPTConfig c = moe();
  c.n_layer = 2, c.d_model = 256, c.n_head = 4, c.n_kv_head = 2, c.d_ff = 512, c.n_experts = 4, c.context = 128;
  c.dtype = DType::F32;
  engine::Cluster cpu = engine::builtin_cluster("cpu-default");
  engine::PlanOptions o = layout(1, 4, 1, 2);  // four rank threads on two cores
  o.in_process = true;
  o.seq_len = 128;
  cpu.devices_per_host = 2;
  const double even = engine::cost_json(c, o, cpu)["step_s"].get<double>();
  o.expert_load = 1.75;
  const double busy = engine::cost_json(c, o, cpu)["step_s"].get<double>();
  cpu.devices_per_host = 4;  // a core each: the busiest rank's extra rows only
  const double own_cores = engine::cost_json(c, o, cpu)["step_s"].get<double>();
  cpu.devices_per_host = 2;
  EXPECT_GT(busy, even);
  EXPECT_GT(busy, own_cores);
  // Recompute's cost scales with the fitted ratio of a forward.
  o.expert_load = 0, o.ep = 1, o.recompute = true;
  const double full = engine::cost_json(c, o, cpu)["time"]["recompute_s"].get<double>();
  cpu.recompute_ratio = 0.8;
  EXPECT_NEAR(engine::cost_json(c, o, cpu)["time"]["recompute_s"].get<double>(), 0.8 * full, 1e-12);
  cpu.recompute_ratio = 0.01;
  EXPECT_THROW(cpu.check(), Error);
}

// Several calibrations of one machine: each figure's median, a link over the runs that
// measured it, the GEMM curve point by point; names and counts the first's.
TEST(PlanCost, MedianOfCalibrations) {
  std::vector<engine::Cluster> runs(3, engine::builtin_cluster("cpu-default"));
  const double eff[3] = {0.94, 1.21, 1.02}, bw[3] = {8e9, 6e9, 7e9};
  for (int i = 0; i < 3; ++i) {
    runs[i].compute_efficiency = eff[i];
    runs[i].intra.bandwidth = bw[i];
    runs[i].matmul_sizes = {64, 1024};
    runs[i].matmul_efficiency = {0.5 + 0.1 * i, 1.0};
  }
  runs[0].name = "first";
  runs[2].processes = {1e9, 4e-6};  // only the last run timed the processes' link
  const engine::Cluster m = engine::median_cluster(runs);
  EXPECT_EQ(m.name, "first");
  EXPECT_DOUBLE_EQ(m.compute_efficiency, 1.02);
  EXPECT_DOUBLE_EQ(m.intra.bandwidth, 7e9);
  EXPECT_DOUBLE_EQ(m.processes.bandwidth, 1e9);
  EXPECT_DOUBLE_EQ(m.processes.latency, 4e-6);
  EXPECT_DOUBLE_EQ(m.matmul_efficiency[0], 0.6);
  runs.pop_back();  // an even count: the mean of the middle two
  EXPECT_DOUBLE_EQ(engine::median_cluster(runs).compute_efficiency, (0.94 + 1.21) / 2);
  EXPECT_DOUBLE_EQ(engine::median_cluster(runs).processes.bandwidth, 0.0);  // none measured it
  EXPECT_THROW(engine::median_cluster({}), Error);
}

}  // namespace
}  // namespace dt
