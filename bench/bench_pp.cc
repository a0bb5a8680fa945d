// bench_pp: pipeline-parallel training on the local backend (P = 2 stages, one core each)
// against its anchors, measured in the same run, medians of timed steps after warm-up, all
// on the same global batch B:
//   A            one rank, one kernel thread, the same micro-batches (what the pipeline divides)
//   1F1B M       pp 2, 1F1B, M = 2, 4, 8 micro-batches
//   GPipe 8      pp 2, GPipe, M = 8
//   interleaved  pp 2, interleaved 1F1B with 2 chunks per rank, M = 8
//   ZB-H1 8      pp 2, zero bubble H1 (split backward), M = 8
// Printed for each: the step time and t_A / t (2 would be a perfect split), the measured
// bubble (1 - the stages' summed compute time / (P x the step), engine::StepStats::pipeline)
// next to the schedule's formula and the simulator's figure with measured action costs, and
// rank 0's peak activation memory next to the simulator's count of live micro-batches.
// Exits 0 whatever the figures (DESIGN.md section 7).
//   bench_pp [--layers N] [--d-model N] [--heads N] [--context N] [--batch B] [--steps N]
//            [--quick] [--json PATH]
#include <cstdio>

#include "comm/mesh.h"
#include "common/bench_util.h"
#include "common/model_inputs.h"
#include "core/allocator.h"
#include "core/thread_pool.h"
#include "engine/trainer.h"
#include "parallel/pipeline_schedule.h"

namespace dt::bench {
namespace {

struct Timed {
  double step_s = 0, bubble = 0, busy0_s = 0;  // medians; busy: stage 0's compute per step
  int64_t peak_activation = 0;                 // rank 0 over the timed steps
  std::vector<int> live;                       // per stage: most micro-batches alive (measured)
};

Timed time_steps(int pp, const std::string& schedule, int v, int64_t M, const nn::GPTConfig& cfg, int64_t B,
                 int warmup, int steps, const std::string& what) {
  nn::GPT model(cfg);
  optim::AdamW opt(model.parameters(), optim::AdamWOptions{});
  engine::TrainOptions o;
  o.max_grad_norm = 1.0;
  o.micro_batches = M;
  engine::ParallelOptions par;
  par.pp_schedule = schedule;
  par.virtual_stages = v;
  comm::BackendOptions bo;
  std::shared_ptr<comm::Mesh> mesh = pp > 1 ? comm::Mesh::create("local", {1, pp, 1, 1, 1}, bo) : nullptr;
  engine::Trainer t(mesh, model, opt, o, par);
  Batch b = random_batch(B, cfg.context, cfg.vocab_size, 7);
  std::vector<double> step_s, bubble, busy;
  Timed r;
  for (int i = 0; i < warmup + steps; ++i) {
    progress(what, i + 1, warmup + steps, i < warmup ? "warm-up step" : "timed step");
    if (i == warmup) reset_peaks(Device::cpu());
    const double t0 = now_s();
    const engine::StepStats st = t.train_step(b.in, b.tg);
    const double dt = now_s() - t0;
    if (i < warmup) continue;
    step_s.push_back(dt);
    bubble.push_back(st.pipeline.bubble_fraction);
    busy.push_back(st.pipeline.stage_busy_s.empty() ? st.pipeline.busy_s : st.pipeline.stage_busy_s[0]);
    r.live = st.pipeline.stage_activation_peak;
  }
  r.step_s = median(step_s);
  r.bubble = median(bubble);
  r.busy0_s = median(busy);
  const Ledger* l = mesh ? rank_ledger(Device::cpu(), 0) : nullptr;
  r.peak_activation = l ? l->peak(DT_MEM_ACTIVATION) : ledger_for(Device::cpu()).peak(DT_MEM_ACTIVATION);
  return r;
}

}  // namespace
}  // namespace dt::bench

int main(int argc, char** argv) {
  using namespace dt;
  using namespace dt::bench;
  const std::string usage =
      "usage: bench_pp [--layers N] [--d-model N] [--heads N] [--context N] [--batch B] [--steps N]\n"
      "                [--quick] [--json PATH]\n"
      "  default: gpt-small (6 layers, d_model 384, 6 heads, context 256), global batch 8\n"
      "  --quick  4 layers, d_model 64, 4 heads, context 32, batch 8, 2 steps\n";
  Options opt = parse_args(argc, argv, usage, {"layers", "d-model", "heads", "context", "batch", "steps"});
  auto flag = [&](const char* k, int64_t def) { return positive_flag(opt, k, def, usage, "bench_pp"); };
  const nn::GPTConfig cfg = gpt_from_flags(opt, opt.quick ? GptShape{4, 64, 4, 32} : GptShape{6, 384, 6, 256},
                                           usage, "bench_pp");
  const int64_t B = flag("batch", 8);
  const int steps = static_cast<int>(flag("steps", opt.quick ? 2 : 5)), warmup = opt.quick ? 1 : 2;
  Report report("bench_pp");
  const std::string load_before = load_average();
  std::printf("bench_pp: %s, global batch %lld x %lld tokens, P = 2 stages; load average at start: %s\n\n",
              cfg.str().c_str(), static_cast<long long>(B), static_cast<long long>(cfg.context), load_before.c_str());
  try {
    set_kernel_threads(1);  // each stage one core, as each rank of the pipeline gets
    struct Run {
      const char* name;
      std::string schedule;
      int v;
      int64_t M;
      Timed t;
    };
    std::vector<Run> runs = {{"1F1B M 2", "1f1b", 1, 2, {}},        {"1F1B M 4", "1f1b", 1, 4, {}},
                             {"1F1B M 8", "1f1b", 1, 8, {}},        {"GPipe M 8", "gpipe", 1, 8, {}},
                             {"interleaved M 8", "interleaved", 2, 8, {}}, {"ZB-H1 M 8", "zb-h1", 1, 8, {}}};
    const Timed a = time_steps(1, "1f1b", 1, 8, cfg, B, warmup, steps, "A: 1 rank, M 8");
    for (Run& r : runs) r.t = time_steps(2, r.schedule, r.v, r.M, cfg, B, warmup, steps, r.name);
    std::printf("\n  A  one rank, one thread, M 8: %8.1f ms/step; peak activations %.2f MB\n", a.step_s * 1e3,
                static_cast<double>(a.peak_activation) / 1e6);
    std::printf("\n  %-16s %9s %7s %9s %9s %9s %12s %10s\n", "pp 2", "ms/step", "t_A/t", "bubble", "formula",
                "simulated", "act. MB r0", "live r0");
    for (const Run& r : runs) {
      const int M = static_cast<int>(r.M);
      const parallel::PipeSchedule s = parallel::make_pipe_schedule(r.schedule, 2, M, r.v);
      // The simulator with this run's measured costs: stage 0's compute per micro-batch,
      // a backward twice a forward (the cost model the formulas assume).
      parallel::PipeCosts costs;
      costs.forward = r.t.busy0_s / (3.0 * M);
      costs.backward = 2.0 * costs.forward;
      costs.backward_input = costs.backward_weight = costs.forward;
      const parallel::PipeSimulation sim = parallel::simulate(s, costs);
      const double formula = parallel::bubble_formula(r.schedule, 2, M, r.v);
      const int live = r.t.live.empty() ? 0 : r.t.live[0];
      std::printf("  %-16s %9.1f %7.3f %8.1f%% %8.1f%% %8.1f%% %12.2f %4d (sim %d)\n", r.name, r.t.step_s * 1e3,
                  a.step_s / r.t.step_s, 100 * r.t.bubble, 100 * formula, 100 * sim.bubble_fraction,
                  static_cast<double>(r.t.peak_activation) / 1e6, live, sim.activation_peak[0]);
      report.add("pp2", r.name).num("step_s", r.t.step_s).num("vs_one_rank", a.step_s / r.t.step_s)
          .num("bubble_measured", r.t.bubble).num("bubble_formula", formula).num("bubble_simulated", sim.bubble_fraction)
          .num("peak_activation_bytes", static_cast<double>(r.t.peak_activation))
          .num("live_micro_batches_rank0", live).num("live_micro_batches_rank0_simulated", sim.activation_peak[0]);
    }
    const Timed& f8 = runs[2].t;
    const Timed& g8 = runs[3].t;
    const Timed& i8 = runs[4].t;
    const Timed& z8 = runs[5].t;
    std::printf("\n  GPipe against 1F1B (M 8): step t_1F1B / t_GPipe = %.3f, rank 0's activations GPipe / 1F1B = %.3f\n",
                f8.step_s / g8.step_s, static_cast<double>(g8.peak_activation) / static_cast<double>(f8.peak_activation));
    std::printf("  interleaved against 1F1B (M 8): step t_1F1B / t_interleaved = %.3f, bubble %.1f%% -> %.1f%%\n",
                f8.step_s / i8.step_s, 100 * f8.bubble, 100 * i8.bubble);
    std::printf("  ZB-H1 against 1F1B (M 8): step t_1F1B / t_ZB-H1 = %.3f, bubble %.1f%% -> %.1f%%, activations %.3f\n",
                f8.step_s / z8.step_s, 100 * f8.bubble, 100 * z8.bubble,
                static_cast<double>(z8.peak_activation) / static_cast<double>(f8.peak_activation));
    report.add("ratio", "zbh1_vs_1f1b").num("step", f8.step_s / z8.step_s);
    report.add("anchor", "one_rank_one_thread").num("step_s", a.step_s)
        .num("peak_activation_bytes", static_cast<double>(a.peak_activation));
    report.add("ratio", "gpipe_vs_1f1b").num("step", f8.step_s / g8.step_s)
        .num("activation", static_cast<double>(g8.peak_activation) / static_cast<double>(f8.peak_activation));
    report.add("ratio", "interleaved_vs_1f1b").num("step", f8.step_s / i8.step_s);
  } catch (const std::exception& e) {
    std::printf("failed: %s\n", e.what());
    report.note("pp", "failed", e.what());
  }
  report.meta().str("model", cfg.str()).num("global_batch", static_cast<double>(B)).flag("quick", opt.quick)
      .str("load_before", load_before).str("load_after", load_average());
  if (!opt.json_path.empty() && !report.write(opt.json_path)) return 1;
  return 0;
}
