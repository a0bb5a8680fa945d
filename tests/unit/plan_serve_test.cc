// The serving planner (engine/plan_serve.h): its memory is the library's (weights from the
// plan's parameter count, the KV cache from PagedKv::bytes_per_block, per pp stage); its
// latency behaves as decode does (grows with the batch, falls with tp at batch 1, a
// pipeline adds its fill); the batch it picks is the largest within the latency target and
// the memory; the search ranks by tokens per second among the layouts that meet the
// targets, and a tight target moves it from replicas to tensor parallelism. Bad input is
// refused naming the field. bench/bench_plan_serve.cc holds the times to measurement.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/cluster.h"
#include "engine/plan_serve.h"
#include "nn/config.h"
#include "nn/paged_kv.h"

namespace dt {
namespace DT_TEST_NS {

// A Llama-2-7B shape in bf16 (32 layers, width 4096, 32 heads, SwiGLU 11008, 32000 tokens).
nn::GPTConfig llama7b() {
  nn::GPTConfig c;
  c.vocab_size = 32000, c.context = 4096, c.n_layer = 32, c.n_head = 32, c.d_model = 4096, c.d_ff = 11008;
  c.norm = nn::NormKind::RMSNorm, c.pos = nn::PosKind::RoPE, c.act = nn::Act::SwiGLU;
  c.tied_embeddings = false, c.bias = false, c.dtype = DType::BF16;
  return c;
}

engine::ServePlanOptions layout(int64_t replicas, int64_t tp, int64_t pp, int64_t batch = 0) {
  engine::ServePlanOptions o;
  o.replicas = replicas, o.tp = tp, o.pp = pp, o.batch = batch;
  o.prompt = 1024, o.output = 256;
  return o;
}

TEST(PlanServe, MemoryIsTheLibrarysWeightsAndPagedCache) {
  const nn::GPTConfig c = llama7b();
  const engine::Cluster h100 = engine::builtin_cluster("h100-node");
  for (int64_t tp : {1, 2, 8}) {
    const nlohmann::json j = engine::serve_cost_json(c, layout(8 / tp, tp, 1, 4), h100);
    const nlohmann::json& m = j["ranks"][0]["memory"];
    EXPECT_DOUBLE_EQ(m["weights"].get<double>(), 2.0 * static_cast<double>(c.param_count(tp, nullptr))) << "tp " << tp;
    const int64_t blocks = (1024 + 256 + 15) / 16;
    const double kv = static_cast<double>(blocks * nn::PagedKv::bytes_per_block(c, 16, c.n_head / tp));
    EXPECT_DOUBLE_EQ(j["ranks"][0]["kv_bytes_per_sequence"].get<double>(), kv) << "tp " << tp;
    EXPECT_DOUBLE_EQ(m["kv_cache"].get<double>(), 4 * kv) << "tp " << tp;
  }
  // A pipeline's stages hold their blocks' caches: together the whole model's.
  const nlohmann::json pp = engine::serve_cost_json(c, layout(1, 1, 4, 4), h100);
  double kv = 0;
  for (const auto& r : pp["ranks"]) kv += r["kv_bytes_per_sequence"].get<double>();
  EXPECT_DOUBLE_EQ(kv, static_cast<double>((1280 / 16) * nn::PagedKv::bytes_per_block(c, 16, 32)));
}

TEST(PlanServe, LatencyBehavesAsDecodeDoes) {
  const nn::GPTConfig c = llama7b();
  const engine::Cluster h100 = engine::builtin_cluster("h100-node");
  auto itl = [&](int64_t r, int64_t tp, int64_t pp, int64_t b) {
    return engine::serve_cost_json(c, layout(r, tp, pp, b), h100)["itl_s"].get<double>();
  };
  EXPECT_LT(itl(8, 1, 1, 1), itl(8, 1, 1, 64));       // more sequences, longer steps
  EXPECT_LT(itl(1, 8, 1, 1), 0.6 * itl(8, 1, 1, 1));  // tp 8 reads an eighth of the weights each
  EXPECT_GT(itl(1, 1, 8, 1), itl(1, 8, 1, 1));        // a pipeline does not split one token's work
  // Decode at batch 1 reads the weights once a token: on an H100 (about 2.85 TB/s achieved)
  // 13.5 GB of bf16 weights take about 4.7 ms.
  EXPECT_GT(itl(8, 1, 1, 1), 4e-3);
  EXPECT_LT(itl(8, 1, 1, 1), 10e-3);
  // Batching is nearly free while the weights' read dominates (the cached keys and values
  // of 8 sequences of 1152 positions are a third of the weights).
  const nlohmann::json a = engine::serve_cost_json(c, layout(8, 1, 1, 1), h100),
                       b = engine::serve_cost_json(c, layout(8, 1, 1, 8), h100);
  EXPECT_GT(b["tokens_per_s"].get<double>(), 4 * a["tokens_per_s"].get<double>()) << a.dump() << b.dump();
}

TEST(PlanServe, TheBatchIsTheLargestWithinTheTargetAndTheMemory) {
  const nn::GPTConfig c = llama7b();
  const engine::Cluster h100 = engine::builtin_cluster("h100-node");
  engine::ServePlanOptions o = layout(8, 1, 1);
  const nlohmann::json free = engine::serve_cost_json(c, o, h100);
  EXPECT_EQ(free["batch_limited_by"], "memory");
  EXPECT_DOUBLE_EQ(free["batch"].get<double>(), free["max_batch_by_memory"].get<double>());
  EXPECT_LE(free["peak_bytes"].get<double>(), free["budget_bytes"].get<double>());
  o.itl_target_s = 0.5 * free["itl_s"].get<double>();
  const nlohmann::json cut = engine::serve_cost_json(c, o, h100);
  EXPECT_EQ(cut["batch_limited_by"], "itl_target");
  EXPECT_LE(cut["itl_s"].get<double>(), o.itl_target_s);
  engine::ServePlanOptions one_more = o;
  one_more.batch = static_cast<int64_t>(cut["batch"].get<double>()) + 1;
  EXPECT_GT(engine::serve_cost_json(c, one_more, h100)["itl_s"].get<double>(), o.itl_target_s);
}

TEST(PlanServe, TheSearchTradesReplicasForTensorParallelismUnderATightTarget) {
  const nn::GPTConfig c = llama7b();
  const engine::Cluster h100 = engine::builtin_cluster("h100-node");
  engine::ServePlanOptions o = layout(1, 1, 1);
  o.top = 3;
  const nlohmann::json loose = engine::serve_search_json(c, o, h100);
  ASSERT_EQ(loose["best"].size(), 3u);
  EXPECT_GE(loose["best"][0]["tokens_per_s"].get<double>(), loose["best"][1]["tokens_per_s"].get<double>());
  EXPECT_GE(loose["best"][1]["tokens_per_s"].get<double>(), loose["best"][2]["tokens_per_s"].get<double>());
  EXPECT_NE(loose["best"][1]["loses_by"], "-");
  // Every layout of 8 devices costed: tp 1, 2, 4, 8 by pp 1, 2, 4, 8 where they multiply to 8 or less.
  EXPECT_EQ(loose["evaluated"], 10);
  o.itl_target_s = 4e-3;  // below one H100's weight read
  const nlohmann::json tight = engine::serve_search_json(c, o, h100);
  ASSERT_FALSE(tight["best"].empty());
  EXPECT_GT(tight["best"][0]["layout"]["tp"].get<int64_t>(), 1) << tight["best"][0].dump();
  for (const auto& r : tight["best"]) EXPECT_LE(r["itl_s"].get<double>(), 4e-3);
  EXPECT_GT(tight["rejected"].size(), 0u);
}

TEST(PlanServe, BadInputIsNamed) {
  const nn::GPTConfig c = llama7b();
  const engine::Cluster h100 = engine::builtin_cluster("h100-node");
  auto refused = [&](engine::ServePlanOptions o, const std::string& want) {
    try {
      engine::serve_cost_json(c, o, h100);
      ADD_FAILURE() << "accepted; wanted an error naming " << want;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  engine::ServePlanOptions o = layout(1, 1, 1);
  o.prompt = 4000;
  refused(o, "prompt + output = 4256 tokens; accepted: at most the model's context (4096)");
  o = layout(1, 3, 1);
  refused(o, "tp");
  o = layout(16, 1, 1);
  refused(o, "16 ranks on a cluster of 8 devices");
  o = layout(1, 1, 1);
  o.memory_fraction = 0;
  refused(o, "memory_fraction");
  o = layout(1, 1, 1);
  o.itl_target_s = -1;
  refused(o, "itl_target");
}

}  // namespace
}  // namespace dt
