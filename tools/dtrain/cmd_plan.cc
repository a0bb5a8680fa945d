// dtrain plan: per-rank memory of the model states (weights, gradients, optimizer state)
// for a dp size, a ZeRO stage and a precision, by the ZeRO paper's formulas (Rajbhandari et
// al., 2020, section 3 and Table 1), the communication per step, and the effective batch.
// It counts the --model's parameters through the C API without building it (of any size);
// --params takes a raw count instead (e.g. 7.5e9). With --tp (and --sp) the library's plan
// (dt_plan_json) gives the parameters one tp rank holds, the tp traffic per block and the
// norm-region activations.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "flags.h"
#include "model_args.h"

namespace dtcli {
namespace {

struct PlanArgs {
  ModelArgs model;
  double params = 0;
  int64_t dp = 1, zero = -1, micro_batch = 1, accumulation = 1, context = 256, tp = 1;
  bool sp = false;
  std::string json;
};

std::string gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, bytes >= 1e9 ? "%.1f GB" : bytes >= 1e6 ? "%.1f MB" : "%.0f B",
                bytes >= 1e9 ? bytes / 1e9 : bytes >= 1e6 ? bytes / 1e6 : bytes);
  return buf;
}

int run_plan(const PlanArgs& a) {
  const std::string precision = a.model.precision.empty() ? "bf16" : a.model.precision;  // the paper's case
  const StateBytes b = state_bytes(precision);
  double psi = a.params;
  std::string what;
  if (psi > 0) {  // at most 1e15 (its range): exact as an integer
    what = "a model of " + std::to_string(static_cast<long long>(psi)) + " parameters";
  } else {  // counted by the library from the flags, without building the model
    const int64_t n = a.model.count_params(a.context);
    psi = static_cast<double>(n);
    what = "--model " + a.model.preset + " (" + std::to_string(n) + " parameters)";
  }
  if (a.sp && a.tp < 2) throw CliError("--sp splits tokens over the tensor-parallel ranks; accepted with --tp >= 2");
  nlohmann::json tp_plan;
  if (a.tp > 1) {
    if (a.params > 0) throw CliError("--tp needs the model's shape, not a raw count; accepted with --tp: --model and "
                                     "its flags (without --params)");
    tp_plan = a.model.plan(a.context, a.dp, a.tp, a.sp, a.micro_batch, 0, a.accumulation);
    psi = tp_plan["params_per_tp_rank"].get<double>();
    std::printf("tensor parallel over tp = %lld: one tp rank holds %.0f parameters, %.0f of them whole on every tp "
                "rank\n(norms, positions, row-parallel biases); the ZeRO stages below shard that part over dp.\n\n",
                static_cast<long long>(a.tp), psi, tp_plan["replicated_over_tp"].get<double>());
  }
  const double n = static_cast<double>(a.dp);
  std::printf("%s, dp = %lld, %s: %g + %g + K=%g bytes per parameter (weights, grads, optimizer)\n\n", what.c_str(),
              static_cast<long long>(a.dp), precision.c_str(), b.w, b.g, b.k);
  std::printf("  per-rank model states (ZeRO paper, Table 1 convention; activations not included)\n");
  std::printf("  %-14s %-30s %12s %12s %12s %12s\n", "stage", "formula", "weights", "grads", "optimizer", "total");
  const char* formula[4] = {"(w+g+K) psi", "(w+g) psi + K psi/N", "w psi + (g+K) psi/N", "(w+g+K) psi/N"};
  const char* name[4] = {"baseline (DDP)", "ZeRO-1", "ZeRO-2", "ZeRO-3 / FSDP"};
  nlohmann::json stages = nlohmann::json::array();
  for (int s = 0; s <= 3; ++s) {
    if (a.zero >= 0 && s != a.zero) continue;
    const double w = s >= 3 ? b.w * psi / n : b.w * psi, g = s >= 2 ? b.g * psi / n : b.g * psi,
                 k = s >= 1 ? b.k * psi / n : b.k * psi, total = stage_bytes(s, psi, n, b);
    std::printf("  %-14s %-30s %12s %12s %12s %12s\n", name[s], formula[s], gb(w).c_str(), gb(g).c_str(),
                gb(k).c_str(), gb(total).c_str());
    // Per step, per rank: DDP and ZeRO-1/2 all-reduce (or reduce-scatter + all-gather) the
    // gradients, 2 psi elements; ZeRO-3 gathers the weights for forward and again for
    // backward and reduce-scatters the gradients, 3 psi (1.5x).
    const double elems = s == 3 ? 3 * psi : 2 * psi;
    stages.push_back({{"stage", s},          {"name", name[s]},   {"weights_bytes", w}, {"grads_bytes", g},
                      {"optimizer_bytes", k}, {"total_bytes", total}, {"comm_elements_per_step", elems},
                      {"comm_bytes_per_step", elems * b.g}});
  }
  std::printf("\n  communication per step and rank: 2 psi elements (DDP, ZeRO-1, ZeRO-2: the gradient\n"
              "  all-reduce as reduce-scatter + all-gather), 3 psi for ZeRO-3 (weights gathered for\n"
              "  forward and for backward, gradients reduce-scattered): 1.5x. Here 2 psi = %s and\n"
              "  3 psi = %s in %g-byte elements.\n",
              gb(2 * psi * b.g).c_str(), gb(3 * psi * b.g).c_str(), b.g);
  if (a.tp > 1) {
    const nlohmann::json& t = tp_plan["tp_comm"];
    const nlohmann::json& act = tp_plan["activations"];
    std::printf("\n  tensor parallel%s, per micro-batch of %lld sequences (S = tokens x d_model x dtype = %s):\n"
                "    each block: %s\n"
                "    wire bytes per rank: %s per block, %s embedding + head, %s loss; %s per micro-batch,\n"
                "    %s per step\n"
                "    norm-region activations per block and rank: %s (without SP %s)\n",
                a.sp ? " + sequence parallel" : "", static_cast<long long>(a.micro_batch),
                gb(t["S_bytes"].get<double>()).c_str(), t["block_collectives"].get<std::string>().c_str(),
                gb(t["wire_bytes_per_block"].get<double>()).c_str(),
                gb(t["wire_bytes_embedding_and_head"].get<double>()).c_str(), gb(t["wire_bytes_loss"].get<double>()).c_str(),
                gb(t["wire_bytes_per_micro_batch"].get<double>()).c_str(), gb(t["wire_bytes_per_step"].get<double>()).c_str(),
                gb(act["norm_region_bytes_per_block"].get<double>()).c_str(),
                gb(act["norm_region_bytes_per_block_without_sp"].get<double>()).c_str());
  }
  const int64_t eff = a.micro_batch * a.dp * a.accumulation;
  std::printf("\n  effective batch = micro-batch x dp x accumulation = %lld x %lld x %lld = %lld sequences\n",
              static_cast<long long>(a.micro_batch), static_cast<long long>(a.dp),
              static_cast<long long>(a.accumulation), static_cast<long long>(eff));
  if (!a.json.empty()) {
    nlohmann::json j = {{"params", psi},           {"dp", a.dp},        {"precision", precision},
                        {"bytes_per_param", {{"weights", b.w}, {"grads", b.g}, {"optimizer", b.k}}},
                        {"stages", stages},        {"effective_batch", eff}};
    if (a.tp > 1) j["tensor_parallel"] = tp_plan;
    write_file(a.json, j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* c = app.add_subcommand("plan", "Per-rank memory and communication of DDP, ZeRO-1/2/3 and TP/SP, by formula");
  c->footer("Examples:\n"
            "  dtrain plan --params 7.5e9 --dp 64          (the ZeRO paper's Table 1: 120, 31.4, 16.6, 1.9 GB)\n"
            "  dtrain plan --model gpt-small --dp 4 --zero 3 --precision f32\n"
            "  dtrain plan --params 1e9 --dp 4 --micro-batch 2 --accumulation 8   (effective batch 64)\n"
            "  dtrain plan --model gpt-small --dp 2 --tp 2 --sp --zero 1   (per-rank parts, tp traffic per block)");
  a->model.add_to(*c);  // --precision among them: here bf16 (the default) or f16 count 2 + 2 + 12 bytes/param, f32 4 + 4 + 8
  add_real(c, "--params", a->params, {1, 1e15, "count the --model's parameters"},
           "A raw parameter count instead of --model (e.g. 7.5e9)");
  add_int(c, "--context", a->context, {1, 65536}, "Context of the --model built to count its parameters");
  add_int(c, "--dp", a->dp, {1, 1048576}, "Data-parallel ranks N");
  add_int(c, "--tp", a->tp, {1, 1024}, "Tensor-parallel ranks per dp rank (needs --model, not --params)");
  c->add_flag("--sp", a->sp, "Sequence parallel over the --tp ranks");
  add_int(c, "--zero", a->zero, {0, 3}, "Only this ZeRO stage (0: DDP, 1, 2, 3); default: all four");
  add_int(c, "--micro-batch", a->micro_batch, {1, 1048576}, "Sequences per rank per micro-batch");
  add_int(c, "--accumulation", a->accumulation, {1, 1048576}, "Micro-batches per step (gradient accumulation)");
  c->add_option("--json", a->json, "Also write the figures as JSON to this file");
  c->callback([a] { throw Exit{run_plan(*a)}; });
}

}  // namespace dtcli
