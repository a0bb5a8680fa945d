// bench_tp: tensor-parallel training on the local backend against its anchors, measured in
// the same run, medians of timed steps after warm-up, all on the same global batch B:
//   A  one rank, one kernel thread          (what tp divides)
//   B  tp 2: two ranks of this process, each its half of every block (one core per rank)
//   C  dp 2 (DDP): two ranks, each half of the batch
//   D  one rank, two kernel threads         (the same cores threading one model)
// Printed: step times and the ratios t_A / t_B (what tp 2 gains over one rank), t_C / t_B
// (tp against dp on the same cores), t_D / t_B; the share of tp 2's step spent in its
// all-reduces (the comm ledger's time on the tp communicator); the bytes all-reduced per
// step against the formula 4 x n_layer x B x T x d_model x dtype size (one all-reduce
// after attention and one after the MLP, forward and backward); and rank 0's peak
// activation memory against one rank's (the blocks' inner activations are split; the
// residual stream and norms are not until sequence parallelism).
// Exits 0 whatever the figures (DESIGN.md section 7).
//   bench_tp [--layers N] [--d-model N] [--heads N] [--context N] [--batch B] [--steps N]
//            [--quick] [--json PATH]
#include <cstdio>

#include "comm/mesh.h"
#include "common/bench_util.h"
#include "common/model_inputs.h"
#include "core/allocator.h"
#include "core/thread_pool.h"
#include "engine/trainer.h"

namespace dt::bench {
namespace {

struct Timed {
  double step_s = 0, allreduce_s = 0;  // per step; all-reduce: rank 0 on tp
  int64_t allreduce_bytes = 0;         // per step, rank 0 on tp
  int64_t peak_activation = 0;         // rank 0 (or the one rank), over the timed steps
};

Timed time_steps(std::shared_ptr<comm::Mesh> mesh, const nn::GPTConfig& cfg, int64_t B, int warmup, int steps,
                 const std::string& what) {
  nn::GPT model(cfg);
  optim::AdamW opt(model.parameters(), optim::AdamWOptions{});
  engine::TrainOptions o;
  o.max_grad_norm = 1.0;
  engine::Trainer t(mesh, model, opt, o);
  Batch b = random_batch(B, cfg.context, cfg.vocab_size, 7);
  std::vector<double> step_s, ar_s, ar_bytes;
  for (int i = 0; i < warmup + steps; ++i) {
    progress(what, i + 1, warmup + steps, i < warmup ? "warm-up step" : "timed step");
    if (i == warmup) reset_peaks(Device::cpu());
    comm::Communicator* c = mesh ? mesh->find_comm(0, "tp") : nullptr;
    const comm::CollStats ar0 = c ? c->ledger().get(comm::CollKind::AllReduce) : comm::CollStats{};
    const double t0 = now_s();
    t.train_step(b.in, b.tg);
    const double dt = now_s() - t0;
    if (i < warmup) continue;
    step_s.push_back(dt);
    if (c) {
      const comm::CollStats ar = c->ledger().get(comm::CollKind::AllReduce);
      ar_s.push_back(ar.seconds - ar0.seconds);
      ar_bytes.push_back(static_cast<double>(ar.bytes - ar0.bytes));
    }
  }
  Timed r;
  r.step_s = median(step_s);
  if (!ar_s.empty()) r.allreduce_s = median(ar_s), r.allreduce_bytes = static_cast<int64_t>(median(ar_bytes));
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
    set_kernel_threads(2);
    const Timed d = time_steps(nullptr, cfg, B, warmup, steps, "D: 1 rank, 2 threads");
    const double tokens = static_cast<double>(B * cfg.context);
    const double formula = 4.0 * static_cast<double>(cfg.n_layer * B * cfg.context * cfg.d_model) * 4.0;  // f32
    std::printf("\n  A  1 rank, 1 thread:    %8.1f ms/step, %8.0f tokens/s\n", a.step_s * 1e3, tokens / a.step_s);
    std::printf("  B  tp 2:                %8.1f ms/step, %8.0f tokens/s\n", tp.step_s * 1e3, tokens / tp.step_s);
    std::printf("  C  dp 2 (DDP):          %8.1f ms/step, %8.0f tokens/s\n", dp.step_s * 1e3, tokens / dp.step_s);
    std::printf("  D  1 rank, 2 threads:   %8.1f ms/step, %8.0f tokens/s\n", d.step_s * 1e3, tokens / d.step_s);
    std::printf("\n  tp 2 over one rank t_A / t_B = %.3f (2: the split costs nothing)\n", a.step_s / tp.step_s);
    std::printf("  tp 2 against dp 2 t_C / t_B = %.3f, against two threads t_D / t_B = %.3f\n", dp.step_s / tp.step_s,
                d.step_s / tp.step_s);
    std::printf("  tp all-reduces: %.2f ms per step, %.1f%% of the step\n", tp.allreduce_s * 1e3,
                100.0 * tp.allreduce_s / tp.step_s);
    std::printf("  tp bytes all-reduced per step %.3f MB, formula 4 x layers x B x T x d x 4 B = %.3f MB: ratio %.3f\n",
                static_cast<double>(tp.allreduce_bytes) / 1e6, formula / 1e6,
                static_cast<double>(tp.allreduce_bytes) / formula);
    std::printf("  peak activation memory: one rank %.2f MB, tp 2 rank 0 %.2f MB: ratio %.3f\n",
                static_cast<double>(a.peak_activation) / 1e6, static_cast<double>(tp.peak_activation) / 1e6,
                static_cast<double>(tp.peak_activation) / static_cast<double>(a.peak_activation));
    report.add("tp", "tp2").num("step_s", tp.step_s).num("tokens_per_s", tokens / tp.step_s)
        .num("allreduce_s", tp.allreduce_s).num("allreduce_fraction", tp.allreduce_s / tp.step_s)
        .num("allreduce_bytes", static_cast<double>(tp.allreduce_bytes)).num("allreduce_bytes_formula", formula)
        .num("peak_activation_bytes", static_cast<double>(tp.peak_activation));
    report.add("anchor", "one_rank_one_thread").num("step_s", a.step_s)
        .num("peak_activation_bytes", static_cast<double>(a.peak_activation));
    report.add("anchor", "dp2").num("step_s", dp.step_s);
    report.add("anchor", "one_rank_two_threads").num("step_s", d.step_s);
    report.add("ratio", "tp2").num("vs_one_rank", a.step_s / tp.step_s).num("vs_dp2", dp.step_s / tp.step_s)
        .num("vs_two_threads", d.step_s / tp.step_s)
        .num("bytes_vs_formula", static_cast<double>(tp.allreduce_bytes) / formula)
        .num("activation_vs_one_rank", static_cast<double>(tp.peak_activation) / static_cast<double>(a.peak_activation));
  } catch (const std::exception& e) {
    std::printf("failed: %s\n", e.what());
    report.note("tp", "failed", e.what());
  }
  report.meta().str("model", cfg.str()).num("global_batch", static_cast<double>(B)).flag("quick", opt.quick)
      .str("load_before", load_before).str("load_after", load_average());
  if (!opt.json_path.empty() && !report.write(opt.json_path)) return 1;
  return 0;
}
