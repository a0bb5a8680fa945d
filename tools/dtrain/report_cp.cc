// dtrain train --report with --cp: ring attention's traffic and the activations per rank.
#include <cstdio>
#include <vector>
#include <nlohmann/json.hpp>

#include "report.h"

namespace dtcli {

int64_t CpMeter::sent(dt_mesh* mesh) { return first_rank_sent(mesh, "cp"); }

nlohmann::json CpMeter::print(dt_mesh* mesh, const nlohmann::json& p) const {
  const int64_t layers = p["layers"].get<int64_t>();
  const double per_step = steps_ > 0 ? static_cast<double>(sent_) / static_cast<double>(steps_) : 0.0;
  const double formula = p["ring_bytes_per_step"].get<double>();
  const double blocks = static_cast<double>(layers) * p["block_activation_bytes_per_rank"].get<double>();
  const double blocks_cp1 = static_cast<double>(layers) * p["block_activation_bytes_at_cp_1"].get<double>();
  std::printf("\nreport: context parallel over cp = %lld (chunks of %lld tokens, %lld tokens of each sequence a rank)\n",
              static_cast<long long>(p["cp"].get<int64_t>()), static_cast<long long>(p["chunk_tokens"].get<int64_t>()),
              static_cast<long long>(p["tokens_per_rank"].get<int64_t>()));
  std::printf("  ring bytes sent per step by the first rank: %.0f; formula 3 x layers x (cp-1) x K and V of its tokens "
              "(f32): %.0f (ratio %.3f)\n",
              per_step, formula, formula > 0 ? per_step / formula : 0.0);
  std::printf("  %-5s %22s %30s %22s\n", "rank", "activation peak", "blocks' activations (formula)", "the same at cp 1");
  nlohmann::json ranks = nlohmann::json::array();
  int32_t count = 0;
  check(dt_mesh_local_rank_count(mesh, &count), "dt_mesh_local_rank_count");
  for (int32_t i = 0; i < count; ++i) {
    int32_t r = 0;
    int64_t cur = 0, peak = 0;
    check(dt_mesh_local_rank(mesh, i, &r), "dt_mesh_local_rank");
    check(dt_memory_rank_stats("cpu", r, DT_MEM_ACTIVATION, &cur, &peak), "rank memory stats");
    std::printf("  %-5d %19.3f MB %27.3f MB %19.3f MB\n", r, static_cast<double>(peak) / 1e6, blocks / 1e6,
                blocks_cp1 / 1e6);
    ranks.push_back({{"rank", r}, {"activation_peak", peak}});
  }
  std::printf("  (the peak also holds the embeddings' and the head's activations and the logits of a micro-batch)\n");
  return {{"cp", p},
          {"ring_bytes_per_step_measured", per_step},
          {"ring_bytes_per_step_formula", formula},
          {"blocks_activation_bytes_formula", blocks},
          {"blocks_activation_bytes_at_cp_1", blocks_cp1},
          {"per_rank", ranks}};
}

}  // namespace dtcli
