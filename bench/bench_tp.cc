// bench_tp: tensor-parallel training on the local backend against its anchors, measured in
// the same run, medians of timed steps after warm-up, all on the same global batch B:
//   A  one rank, one kernel thread          (what tp divides)
//   B  tp 2: two ranks of this process, each its half of every block (one core per rank)
//   C  dp 2 (DDP): two ranks, each half of the batch
//   D  one rank, two kernel threads         (the same cores threading one model)
//   E  tp 2 with sequence parallelism       (all-gathers and reduce-scatters, the norm
//                                            regions split over tokens)
// Printed: step times and the ratios t_A / t_B (what tp 2 gains over one rank), t_C / t_B
// (tp against dp on the same cores), t_D / t_B, t_B / t_E; the share of the step spent in
// tp collectives (the comm ledger's time on the tp communicator); the wire bytes per step
// against the library's plan (engine::plan_json, what dtrain plan prints: the blocks', the
// vocab-parallel embedding's, head's and loss's, SP's extra gathers and norm gradients);
// and rank 0's peak activation memory against one rank's, with and without SP.
// Exits 0 whatever the figures (DESIGN.md section 7).
//   bench_tp [--layers N] [--d-model N] [--heads N] [--context N] [--batch B] [--steps N]
//            [--quick] [--json PATH]
#include <cstdio>

#include "comm/mesh.h"
#include "common/bench_util.h"
#include "common/model_inputs.h"
#include "core/allocator.h"
#include "core/thread_pool.h"
#include "engine/plan.h"
#include "engine/trainer.h"

namespace dt::bench {
namespace {

struct Timed {
  double step_s = 0, coll_s = 0;  // per step; collectives: rank 0 on tp
  int64_t wire_bytes = 0;         // per step, rank 0 on tp
  int64_t peak_activation = 0;    // rank 0 (or the one rank), over the timed steps
};

// Rank 0's tp collectives so far: seconds and wire bytes of all-reduces, all-gathers and
// reduce-scatters.
std::pair<double, double> tp_collectives(comm::Communicator* c) {
  double s = 0, w = 0;
  if (c)
    for (comm::CollKind k : {comm::CollKind::AllReduce, comm::CollKind::AllGather, comm::CollKind::ReduceScatter}) {
      const comm::CollStats st = c->ledger().get(k);
      s += st.seconds;
      w += static_cast<double>(st.wire_bytes);
    }
  return {s, w};
}

Timed time_steps(std::shared_ptr<comm::Mesh> mesh, const nn::GPTConfig& cfg, int64_t B, int warmup, int steps,
                 const std::string& what, bool sp = false) {
  nn::GPT model(cfg);
  optim::AdamW opt(model.parameters(), optim::AdamWOptions{});
  engine::TrainOptions o;
  o.max_grad_norm = 1.0;
  engine::ParallelOptions par;
  par.sequence_parallel = sp;
  engine::Trainer t(mesh, model, opt, o, par);
  Batch b = random_batch(B, cfg.context, cfg.vocab_size, 7);
  std::vector<double> step_s, coll_s, wire;
  for (int i = 0; i < warmup + steps; ++i) {
    progress(what, i + 1, warmup + steps, i < warmup ? "warm-up step" : "timed step");
    if (i == warmup) reset_peaks(Device::cpu());
    comm::Communicator* c = mesh ? mesh->find_comm(0, "tp") : nullptr;
    const auto [s0, w0] = tp_collectives(c);
    const double t0 = now_s();
    t.train_step(b.in, b.tg);
    const double dt = now_s() - t0;
    if (i < warmup) continue;
    step_s.push_back(dt);
    if (c) {
      const auto [s1, w1] = tp_collectives(c);
      coll_s.push_back(s1 - s0);
      wire.push_back(w1 - w0);
    }
  }
  Timed r;
  r.step_s = median(step_s);
  if (!coll_s.empty()) r.coll_s = median(coll_s), r.wire_bytes = static_cast<int64_t>(median(wire));
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
      "usage: bench_tp [--layers N] [--d-model N] [--heads N] [--context N] [--batch B] [--steps N]\n"
      "                [--quick] [--json PATH]\n"
      "  default: gpt-small (6 layers, d_model 384, 6 heads, context 256), global batch 8\n"
      "  --quick  2 layers, d_model 64, 4 heads, context 64, batch 4, 2 steps\n";
  Options opt = parse_args(argc, argv, usage, {"layers", "d-model", "heads", "context", "batch", "steps"});
  auto flag = [&](const char* k, int64_t def) { return positive_flag(opt, k, def, usage, "bench_tp"); };
  const nn::GPTConfig cfg = gpt_from_flags(opt, opt.quick ? GptShape{2, 64, 4, 64} : GptShape{6, 384, 6, 256},
                                                usage, "bench_tp");
  const int64_t B = flag("batch", opt.quick ? 4 : 8);
  const int steps = static_cast<int>(flag("steps", opt.quick ? 2 : 8)), warmup = opt.quick ? 1 : 2;
  Report report("bench_tp");
  const std::string load_before = load_average();
  std::printf("bench_tp: %s, global batch %lld x %lld tokens; load average at start: %s\n\n", cfg.str().c_str(),
              static_cast<long long>(B), static_cast<long long>(cfg.context), load_before.c_str());
  try {
    comm::BackendOptions bo;
    set_kernel_threads(1);
    const Timed a = time_steps(nullptr, cfg, B, warmup, steps, "A: 1 rank, 1 thread");
    const Timed tp = time_steps(comm::Mesh::create("local", {1, 1, 1, 1, 2}, bo), cfg, B, warmup, steps, "B: tp 2");
    const Timed dp = time_steps(comm::Mesh::create("local", {2, 1, 1, 1, 1}, bo), cfg, B, warmup, steps, "C: dp 2");
    const Timed sp =
        time_steps(comm::Mesh::create("local", {1, 1, 1, 1, 2}, bo), cfg, B, warmup, steps, "E: tp 2 + sp", true);
    set_kernel_threads(2);
    const Timed d = time_steps(nullptr, cfg, B, warmup, steps, "D: 1 rank, 2 threads");
    const double tokens = static_cast<double>(B * cfg.context);
    // The formulas: the library's plan (engine::plan_json, what dtrain plan prints).
    auto planned = [&](bool sp_on) {
      engine::PlanOptions po;
      po.tp = 2;
      po.sequence_parallel = sp_on;
      po.micro_batch = B;
      po.seq_len = cfg.context;
      return engine::plan_json(cfg, po)["tp_comm"]["wire_bytes_per_step"].get<double>();
    };
    const double formula = planned(false), formula_sp = planned(true);
    std::printf("\n  A  1 rank, 1 thread:    %8.1f ms/step, %8.0f tokens/s\n", a.step_s * 1e3, tokens / a.step_s);
    std::printf("  B  tp 2:                %8.1f ms/step, %8.0f tokens/s\n", tp.step_s * 1e3, tokens / tp.step_s);
    std::printf("  C  dp 2 (DDP):          %8.1f ms/step, %8.0f tokens/s\n", dp.step_s * 1e3, tokens / dp.step_s);
    std::printf("  D  1 rank, 2 threads:   %8.1f ms/step, %8.0f tokens/s\n", d.step_s * 1e3, tokens / d.step_s);
    std::printf("  E  tp 2 + sp:           %8.1f ms/step, %8.0f tokens/s\n", sp.step_s * 1e3, tokens / sp.step_s);
    std::printf("\n  tp 2 over one rank t_A / t_B = %.3f (2: the split costs nothing)\n", a.step_s / tp.step_s);
    std::printf("  tp 2 against dp 2 t_C / t_B = %.3f, against two threads t_D / t_B = %.3f\n", dp.step_s / tp.step_s,
                d.step_s / tp.step_s);
    std::printf("  tp 2 + sp against tp 2 t_B / t_E = %.3f\n", tp.step_s / sp.step_s);
    std::printf("  tp collectives: %.2f ms per step, %.1f%% of the step; with sp %.2f ms, %.1f%%\n", tp.coll_s * 1e3,
                100.0 * tp.coll_s / tp.step_s, sp.coll_s * 1e3, 100.0 * sp.coll_s / sp.step_s);
    std::printf("  tp wire bytes per step %.3f MB, formula (dt_plan_json) %.3f MB: ratio %.3f\n",
                static_cast<double>(tp.wire_bytes) / 1e6, formula / 1e6, static_cast<double>(tp.wire_bytes) / formula);
    std::printf("  sp wire bytes per step %.3f MB, formula (dt_plan_json) %.3f MB: ratio %.3f\n",
                static_cast<double>(sp.wire_bytes) / 1e6, formula_sp / 1e6,
                static_cast<double>(sp.wire_bytes) / formula_sp);
    const double pa = static_cast<double>(a.peak_activation);
    std::printf("  peak activation memory: one rank %.2f MB, tp 2 rank 0 %.2f MB (ratio %.3f), tp 2 + sp %.2f MB "
                "(ratio %.3f)\n", pa / 1e6, static_cast<double>(tp.peak_activation) / 1e6,
                static_cast<double>(tp.peak_activation) / pa, static_cast<double>(sp.peak_activation) / 1e6,
                static_cast<double>(sp.peak_activation) / pa);
    report.add("tp", "tp2").num("step_s", tp.step_s).num("tokens_per_s", tokens / tp.step_s)
        .num("collective_s", tp.coll_s).num("collective_fraction", tp.coll_s / tp.step_s)
        .num("wire_bytes", static_cast<double>(tp.wire_bytes)).num("wire_bytes_formula", formula)
        .num("peak_activation_bytes", static_cast<double>(tp.peak_activation));
    report.add("tp", "tp2_sp").num("step_s", sp.step_s).num("tokens_per_s", tokens / sp.step_s)
        .num("collective_s", sp.coll_s).num("collective_fraction", sp.coll_s / sp.step_s)
        .num("wire_bytes", static_cast<double>(sp.wire_bytes)).num("wire_bytes_formula", formula_sp)
        .num("peak_activation_bytes", static_cast<double>(sp.peak_activation));
    report.add("anchor", "one_rank_one_thread").num("step_s", a.step_s)
        .num("peak_activation_bytes", static_cast<double>(a.peak_activation));
    report.add("anchor", "dp2").num("step_s", dp.step_s);
    report.add("anchor", "one_rank_two_threads").num("step_s", d.step_s);
    report.add("ratio", "tp2").num("vs_one_rank", a.step_s / tp.step_s).num("vs_dp2", dp.step_s / tp.step_s)
        .num("vs_two_threads", d.step_s / tp.step_s)
        .num("bytes_vs_formula", static_cast<double>(tp.wire_bytes) / formula)
        .num("activation_vs_one_rank", static_cast<double>(tp.peak_activation) / pa);
    report.add("ratio", "tp2_sp").num("vs_tp2", tp.step_s / sp.step_s)
        .num("bytes_vs_formula", static_cast<double>(sp.wire_bytes) / formula_sp)
        .num("activation_vs_one_rank", static_cast<double>(sp.peak_activation) / pa)
        .num("activation_vs_tp2", static_cast<double>(sp.peak_activation) / static_cast<double>(tp.peak_activation));
  } catch (const std::exception& e) {
    std::printf("failed: %s\n", e.what());
    report.note("tp", "failed", e.what());
  }
  report.meta().str("model", cfg.str()).num("global_batch", static_cast<double>(B)).flag("quick", opt.quick)
      .str("load_before", load_before).str("load_after", load_average());
  if (!opt.json_path.empty() && !report.write(opt.json_path)) return 1;
  return 0;
}
