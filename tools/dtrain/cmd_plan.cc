// dtrain plan: per-rank memory of the model states (weights, gradients, optimizer state)
// for a dp size, a ZeRO stage and a precision, by the ZeRO paper's formulas (Rajbhandari et
// al., 2020, section 3 and Table 1), the communication per step, and the effective batch.
// It counts the --model's parameters through the C API without building it (of any size);
// --params takes a raw count instead (e.g. 7.5e9). With --tp (and --sp) the library's plan
// (dt_plan_json) gives the parameters one tp rank holds, the tp traffic per block and the
// norm-region activations. With --pp the plan places the blocks into pipeline stages as the
// Trainer does and runs the --pp-schedule on the library's simulator: each stage's model
// states and activations, the bubble simulated and by formula, the activation peaks, the pp
// traffic and the timeline (--timeline-trace: the simulated Chrome trace).
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "flags.h"
#include "model_args.h"
#include "plan_cost_cli.h"
#include "report.h"

namespace dtcli {
namespace {

struct PlanArgs {
  ModelArgs model;
  double params = 0;
  int64_t dp = 1, zero = -1, micro_batch = 1, accumulation = 1, context = 256, tp = 1, ep = 1, cp = 1;
  int64_t micro_batches = -1;  // --micro-batches, the pipeline's name for --accumulation; -1: not given
  bool sp = false;
  PipelineArgs pipe;
  std::string json, timeline_trace;
  CostArgs cost;  // the cost model's flags (plan_cost_cli.h): --cluster, --auto, --calibrate
  // Micro-batches per step: --micro-batches or --accumulation (the same thing; both given
  // must agree).
  int64_t steps_micro_batches() const {
    if (micro_batches < 0) return accumulation;
    if (accumulation != 1 && accumulation != micro_batches)
      throw UsageError("--micro-batches " + std::to_string(micro_batches) + " and --accumulation " +
                       std::to_string(accumulation) + " name the same count; accepted: one of them, or both equal");
    return micro_batches;
  }
};

// The pipeline flags' combinations that the plan refuses before asking the library.
void check_pipeline(const PlanArgs& a) {
  a.pipe.check();
  if (!a.timeline_trace.empty() && a.pipe.pp < 2)
    throw UsageError("--timeline-trace writes a pipeline's simulated timeline; accepted with --pp >= 2 (now --pp " +
                     std::to_string(a.pipe.pp) + ")");
  if (a.pipe.pp > 1 && a.zero == 3)
    throw UsageError("--zero 3 with --pp " + std::to_string(a.pipe.pp) + ": ZeRO-3 gathers each unit around every "
                     "forward and backward, which a pipeline interleaves across micro-batches; accepted with --pp >= 2: "
                     "--zero 0, 1 or 2");
}

std::string gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, bytes >= 1e9 ? "%.1f GB" : bytes >= 1e6 ? "%.1f MB" : "%.0f B",
                bytes >= 1e9 ? bytes / 1e9 : bytes >= 1e6 ? bytes / 1e6 : bytes);
  return buf;
}

std::string percent(double x) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * x);
  return buf;
}

// The pipeline section of the plan: per stage what it holds at ZeRO stage `zero` and its
// activations at the simulated peak; the bubble and the peaks simulated next to their
// formulas; the pp traffic; the timeline.
void print_pipeline(const nlohmann::json& p, int zero, int64_t micro_batch) {
  const std::string name = p["schedule"].get<std::string>();
  const int64_t P = p["P"].get<int64_t>(), M = p["M"].get<int64_t>(), v = p["v"].get<int64_t>();
  const std::string chunks = v > 1 ? ", v = " + std::to_string(v) + " chunks per rank" : "";
  std::printf("\n  pipeline parallel over pp = %lld: %s, M = %lld micro-batches of %lld sequences per step%s\n",
              static_cast<long long>(P), name.c_str(), static_cast<long long>(M), static_cast<long long>(micro_batch),
              chunks.c_str());
  char head[96];
  std::snprintf(head, sizeof head, "balanced, the head and loss counted as %.2f blocks",
                p["head_cost_blocks"].get<double>());
  std::printf("    blocks placed %s; boundaries", p["placement"] == "balanced" ? head : "by --pp-blocks");
  for (const auto& b : p["boundaries"]) std::printf(" %d", b.get<int>());
  const char* zname[3] = {"DDP", "ZeRO-1", "ZeRO-2"};
  std::printf("\n    per rank (%s; activations: the simulated peak x one micro-batch's for a chunk)\n", zname[zero]);
  std::printf("    %-5s %-10s %10s %10s %10s %10s %10s %24s %10s\n", "rank", "blocks", "params", "weights", "grads",
              "optimizer", "tied copy", "activations", "total");
  for (const auto& st : p["stages"]) {
    const nlohmann::json& z = st["stages"][static_cast<size_t>(zero)];
    const double act = st["activation_bytes"].get<double>(), copy = st["tied_copy_bytes"].get<double>();
    const std::string acts = std::to_string(st["activation_peak"].get<int>()) + " x " +
                             gb(st["activation_bytes_per_micro_batch_chunk"].get<double>()) + " = " + gb(act);
    std::printf("    %-5d %-10s %10.0f %10s %10s %10s %10s %24s %10s\n", st["rank"].get<int>(),
                blocks_text(st["chunks"]).c_str(), st["params"].get<double>(),
                gb(z["weights_bytes"].get<double>()).c_str(), gb(z["grads_bytes"].get<double>()).c_str(),
                gb(z["optimizer_bytes"].get<double>()).c_str(), copy > 0 ? gb(copy).c_str() : "-", acts.c_str(),
                gb(z["total_bytes"].get<double>() + copy + act).c_str());
  }
  std::printf("    (tied copy: the token table the last rank's head reads, weights and gradient, never optimizer\n"
              "     state or a ZeRO shard; activations of one block and micro-batch: %s)\n",
              gb(p["block_activation_bytes_per_micro_batch"].get<double>()).c_str());
  std::printf("\n    bubble: simulated %s, formula %s = %s\n", percent(p["bubble_fraction"].get<double>()).c_str(),
              p["bubble_formula_text"].get<std::string>().c_str(), percent(p["bubble_formula"].get<double>()).c_str());
  std::printf("    activation peak per rank (micro-batches%s alive at once), simulated:", v > 1 ? " x chunks" : "");
  for (const auto& k : p["activation_peak"]) std::printf(" %d", k.get<int>());
  std::printf("; formula on rank 0: %d\n", p["activation_peak_formula"].get<int>());
  std::printf("    pp wire bytes per step: 2 x M x %s (a micro-batch's stream) x %d stage boundaries = %s",
              gb(p["pp_message_bytes"].get<double>()).c_str(), p["pp_boundaries"].get<int>(),
              gb(p["pp_wire_bytes_per_step"].get<double>()).c_str());
  const double tied = p["tied_table_wire_bytes_per_step"].get<double>();
  if (tied > 0) std::printf(",\n    + the tied token table's values and gradient %s", gb(tied).c_str());
  std::printf("\n\n  timeline (simulated; a forward costs 1 unit, a backward 2):\n%s",
              p["timeline"].get<std::string>().c_str());
}

// --pp without a model: the schedule itself (dt_pipeline_schedule_json), its actions per
// rank, the simulated bubble and peaks next to their formulas, and the timeline.
int run_schedule_plan(const PlanArgs& a) {
  if (!a.pipe.blocks.empty())  // the schedule alone has no blocks to place: it would be ignored
    throw UsageError("--pp-blocks " + a.pipe.blocks + " places a model's blocks on the stages; accepted with --model or a "
                     "shape flag (--layers, ...); without one, plan --pp shows the schedule alone");
  const int64_t P = a.pipe.pp, M = a.steps_micro_batches();
  const int64_t v = a.pipe.virtual_stages > 0 ? a.pipe.virtual_stages : 1;
  Options o = make_options();
  set(o.get(), "pp", P);
  set(o.get(), "micro_batches", M);
  set(o.get(), "pp_schedule", a.pipe.schedule_name());
  set(o.get(), "virtual_stages", v);
  if (!a.timeline_trace.empty()) set_bool(o.get(), "timeline_trace", true);
  nlohmann::json s = nlohmann::json::parse(read_text(
      [&](char* b, size_t c, size_t* n) { return dt_pipeline_schedule_json(o.get(), b, c, n); }, a.pipe.flags_text().c_str()));
  const std::string name = s["schedule"].get<std::string>();
  const std::string chunks = v > 1 ? ", v = " + std::to_string(v) + " chunks per rank" : "";
  std::printf("pipeline schedule %s over pp = %lld, M = %lld micro-batches%s\n"
              "(no --model: the schedule alone; give --model for each stage's memory)\n\n"
              "  actions per rank (F forward, B backward, recvA/sendA activations, recvG/sendG gradients):\n",
              name.c_str(), static_cast<long long>(P), static_cast<long long>(M), chunks.c_str());
  for (size_t r = 0; r < s["actions"].size(); ++r) {
    std::string line;
    for (const auto& act : s["actions"][r]) line += " " + act.get<std::string>();
    std::printf("    rank %zu:%s\n", r, line.c_str());
  }
  std::printf("\n  bubble: simulated %s, formula %s = %s; utilization %s\n",
              percent(s["bubble_fraction"].get<double>()).c_str(), s["bubble_formula_text"].get<std::string>().c_str(),
              percent(s["bubble_formula"].get<double>()).c_str(), percent(s["utilization"].get<double>()).c_str());
  std::printf("  makespan %.4g time units (a forward 1, a backward 2)\n", s["makespan"].get<double>());
  std::printf("  activation peak per rank (micro-batches%s alive at once), simulated:", v > 1 ? " x chunks" : "");
  for (const auto& k : s["activation_peak"]) std::printf(" %d", k.get<int>());
  std::printf("; formula on rank 0: %d\n\n  timeline (simulated):\n%s", s["activation_peak_formula"].get<int>(),
              s["timeline"].get<std::string>().c_str());
  if (!a.timeline_trace.empty()) {
    write_file(a.timeline_trace, s["chrome_trace"].dump() + "\n");
    s.erase("chrome_trace");
    std::printf("  wrote %s (the simulated timeline as a Chrome trace: open it in https://ui.perfetto.dev)\n",
                a.timeline_trace.c_str());
  }
  if (!a.json.empty()) write_file(a.json, nlohmann::json{{"pipeline_schedule", s}}.dump(2) + "\n");
  return 0;
}

int run_plan(const PlanArgs& a) {
  if (a.cost.calibrate)
    return run_calibrate(a.json.empty() ? "local-cluster.json" : a.json, a.cost.backend, a.cost.calibrate_repeats);
  if (!a.cost.median_of_files.empty()) {
    if (a.json.empty()) throw UsageError("--median-of writes a cluster file; accepted with --json FILE");
    return run_median(a.cost.median_of_files, a.json);
  }
  if (a.cost.serve) {
    if (a.params > 0) throw UsageError("--serve needs the model's shape; accepted: --model and its flags, not --params");
    return run_serve(a.cost, a.model, a.context, a.dp, a.tp, a.pipe.pp, a.json);
  }
  if (a.cost.auto_search) {
    if (a.params > 0) throw UsageError("--auto needs the model's shape; accepted: --model and its flags, not --params");
    return run_search(a.cost, a.model, a.context, a.json);
  }
  check_pipeline(a);
  if (a.pipe.pp > 1 && !a.model.given() && a.params <= 0 && a.tp == 1) return run_schedule_plan(a);
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
  const int64_t M = a.steps_micro_batches();
  nlohmann::json tp_plan;
  if ((a.cost.expert_load > 0 || a.cost.expert_load_peak > 0) && a.cost.cluster.empty())
    throw UsageError("--expert-load and --expert-load-peak price the experts' rows on a cluster; accepted with "
                     "--cluster NAME or FILE");
  if (!a.cost.cluster.empty() && a.params > 0)
    throw UsageError("--cluster costs a model's shape, not a raw count; accepted: --model and its flags (without --params)");
  if (a.tp > 1 || a.pipe.pp > 1 || a.ep > 1 || a.cp > 1 || !a.cost.cluster.empty() ||
      (a.params <= 0 && a.model.given())) {  // the library's plan
    if (a.params > 0)
      throw CliError(std::string(a.tp > 1 ? "--tp" : a.ep > 1 ? "--ep" : a.cp > 1 ? "--cp" : "--pp") +
                     " needs the model's shape, not a raw count; accepted with --tp, --ep, --cp or --pp: --model and "
                     "its flags (without --params)");
    ModelArgs model = a.model;
    model.precision = precision;  // the library's bytes in the precision this page counts
    tp_plan = model.plan(a.context, a.dp, a.tp, a.sp, a.micro_batch, a.cost.seq, M, &a.pipe, !a.timeline_trace.empty(),
                         a.ep, a.cp, a.cost.keys(a.zero > 0 ? a.zero : 0, a.model.recompute));
  }
  nlohmann::json cost;
  if (tp_plan.is_object() && tp_plan.contains("cost")) {
    cost = tp_plan["cost"];
    tp_plan.erase("cost");
  }
  nlohmann::json cp;
  if (tp_plan.is_object() && tp_plan.contains("cp")) {
    cp = tp_plan["cp"];
    tp_plan.erase("cp");
    std::printf("context parallel over cp = %lld: each rank holds 2 chunks of %lld tokens of every sequence (%lld of "
                "%lld);\n  a block's activations per rank %s (at cp 1: %s); ring attention sends the K/V round the "
                "ring:\n  %s per layer forward, 3x that per layer forward and backward: %s per micro-batch, %s per "
                "step\n\n",
                static_cast<long long>(a.cp), static_cast<long long>(cp["chunk_tokens"].get<int64_t>()),
                static_cast<long long>(cp["tokens_per_rank"].get<int64_t>()), static_cast<long long>(a.context),
                gb(cp["block_activation_bytes_per_rank"].get<double>()).c_str(),
                gb(cp["block_activation_bytes_at_cp_1"].get<double>()).c_str(),
                gb(cp["ring_bytes_per_layer_forward"].get<double>()).c_str(),
                gb(cp["ring_bytes_per_micro_batch"].get<double>()).c_str(),
                gb(cp["ring_bytes_per_step"].get<double>()).c_str());
  }
  nlohmann::json moe;
  if (tp_plan.is_object() && tp_plan.contains("moe")) {
    moe = tp_plan["moe"];
    tp_plan.erase("moe");
    psi = moe["params_per_rank"].get<double>();
    std::printf("mixture of experts: %lld experts of each block, top %lld; over ep = %lld each rank holds %lld of them: "
                "%.0f parameters a rank (experts %.0f in all).\n  all-to-all per rank (a router sending each expert as "
                "many rows: counts + 4 x tokens x top-k x (ep-1)/ep rows of d_model): %s per micro-batch, %s per "
                "step\n\n",
                static_cast<long long>(moe["experts"].get<int64_t>()), static_cast<long long>(moe["top_k"].get<int64_t>()),
                static_cast<long long>(a.ep), static_cast<long long>(moe["experts_per_rank"].get<int64_t>()), psi,
                moe["expert_params"].get<double>(), gb(moe["all_to_all_bytes_per_micro_batch"].get<double>()).c_str(),
                gb(moe["all_to_all_bytes_per_step"].get<double>()).c_str());
  }
  if (a.tp > 1) {
    psi = tp_plan["params_per_tp_rank"].get<double>();
    std::printf("tensor parallel over tp = %lld: one tp rank holds %.0f parameters, %.0f of them whole on every tp "
                "rank\n(norms, positions, row-parallel biases); the ZeRO stages below shard that part over dp.\n\n",
                static_cast<long long>(a.tp), psi, tp_plan["replicated_over_tp"].get<double>());
  }
  if (a.pipe.pp > 1)
    std::printf("pipeline parallel over pp = %lld: the table below is the whole model's%s; each stage holds its part\n"
                "(per stage further down).\n\n",
                static_cast<long long>(a.pipe.pp), a.tp > 1 ? " per tp rank" : "");
  const double n = static_cast<double>(a.dp * a.cp);  // ZeRO shards over dp x cp (cp ranks share the gradients)
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
  nlohmann::json pipeline;
  if (a.pipe.pp > 1) {
    pipeline = tp_plan["pipeline"];
    tp_plan.erase("pipeline");
    print_pipeline(pipeline, a.zero > 0 ? static_cast<int>(a.zero) : 0, a.micro_batch);
    if (!a.timeline_trace.empty()) {
      write_file(a.timeline_trace, pipeline["chrome_trace"].dump() + "\n");
      pipeline.erase("chrome_trace");  // in its own file
      std::printf("  wrote %s (the simulated timeline as a Chrome trace: open it in https://ui.perfetto.dev)\n",
                  a.timeline_trace.c_str());
    }
  }
  const int64_t eff = a.micro_batch * a.dp * a.ep * M;  // ep ranks route their own rows
  const std::string ep_name = a.ep > 1 ? " x ep" : "", ep_value = a.ep > 1 ? " x " + std::to_string(a.ep) : "";
  std::printf("\n  effective batch = micro-batch x dp%s x accumulation = %lld x %lld%s x %lld = %lld sequences\n",
              ep_name.c_str(), static_cast<long long>(a.micro_batch), static_cast<long long>(a.dp), ep_value.c_str(),
              static_cast<long long>(M), static_cast<long long>(eff));
  if (cost.is_object()) print_cost(cost);
  if (!a.json.empty()) {
    nlohmann::json j = {{"params", psi},           {"dp", a.dp},        {"precision", precision},
                        {"bytes_per_param", {{"weights", b.w}, {"grads", b.g}, {"optimizer", b.k}}},
                        {"stages", stages},        {"effective_batch", eff}};
    if (a.tp > 1) j["tensor_parallel"] = tp_plan;
    if (moe.is_object()) j["moe"] = moe;
    if (cp.is_object()) j["cp"] = cp;
    if (a.pipe.pp > 1) j["pipeline"] = pipeline;
    if (cost.is_object()) j["cost"] = cost;
    write_file(a.json, j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* c = app.add_subcommand("plan", "Per-rank memory and communication of DDP, ZeRO-1/2/3, TP/SP and pipelines, "
                                            "by formula; with --cluster the predicted step and peak memory, --auto the "
                                            "best layouts");
  c->footer("Examples:\n"
            "  dtrain plan --params 7.5e9 --dp 64          (the ZeRO paper's Table 1: 120, 31.4, 16.6, 1.9 GB)\n"
            "  dtrain plan --model gpt-small --dp 4 --zero 3 --precision f32\n"
            "  dtrain plan --params 1e9 --dp 4 --micro-batch 2 --accumulation 8   (effective batch 64)\n"
            "  dtrain plan --model gpt-small --dp 2 --tp 2 --sp --zero 1   (per-rank parts, tp traffic per block)\n"
            "  dtrain plan --model gpt-small --pp 4 --micro-batches 8 --pp-schedule 1f1b   (stages, bubble, timeline)\n"
            "  dtrain plan --model gpt-small --layers 8 --pp 4 --micro-batches 8 --pp-schedule interleaved --virtual-stages 2\n"
            "  dtrain plan --calibrate --json local.json   (this machine, measured: a cluster)\n"
            "  dtrain plan --model gpt-small --dp 2 --zero 1 --precision f32 --cluster local.json   (predicted step, memory)\n"
            "  dtrain plan --auto --cluster h100-node:16 --layers 96 --d-model 12288 --heads 96 --context 2048 "
            "--global-batch 1536");
  a->model.add_to(*c);  // --precision among them: here bf16 (the default) or f16 count 2 + 2 + 12 bytes/param, f32 4 + 4 + 8
  add_real(c, "--params", a->params, {1, 1e15, "count the --model's parameters"},
           "A raw parameter count instead of --model (e.g. 7.5e9)");
  add_int(c, "--context", a->context, {1, 65536}, "Context of the --model built to count its parameters");
  add_int(c, "--dp", a->dp, {1, 1048576}, "Data-parallel ranks N");
  add_int(c, "--tp", a->tp, {1, 1024}, "Tensor-parallel ranks per dp rank (needs --model, not --params)");
  add_int(c, "--ep", a->ep, {1, 1024},
          "Expert-parallel ranks: a mixture of experts' experts split over them (needs --experts or an MoE --model)");
  add_int(c, "--cp", a->cp, {1, 1024},
          "Context-parallel ranks: every sequence of --context tokens split over them (ring attention; --context a "
          "multiple of 2 x cp)");
  c->add_flag("--sp", a->sp, "Sequence parallel over the --tp ranks");
  add_int(c, "--zero", a->zero, {0, 3}, "Only this ZeRO stage (0: DDP, 1, 2, 3); default: all four");
  add_int(c, "--micro-batch", a->micro_batch, {1, 1048576}, "Sequences per rank per micro-batch");
  add_int(c, "--accumulation", a->accumulation, {1, 1048576}, "Micro-batches per step (gradient accumulation)");
  add_int(c, "--micro-batches", a->micro_batches, {1, 1048576},
          "Micro-batches per step: the pipeline's M (the same count as --accumulation, as train names it)");
  a->pipe.add_to(*c);
  c->add_option("--timeline-trace", a->timeline_trace,
                "With --pp: write the simulated schedule as a Chrome trace (chrome://tracing, Perfetto) to this file")
      ->group("Pipeline");
  c->add_option("--json", a->json, "Also write the figures as JSON to this file (--calibrate: the cluster's)");
  a->cost.add_to(*c);
  c->callback([a] { throw Exit{run_plan(*a)}; });
}

}  // namespace dtcli
