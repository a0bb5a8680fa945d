// bench_ddp: data-parallel training on the local backend against its anchors, measured in
// the same run, medians of timed steps after warm-up:
//   A  one rank, one kernel thread, the per-rank batch b  (what each DDP rank computes)
//   B  DDP over 2 ranks of this process, global batch 2b  (one core per rank)
//   C  one rank, 2 kernel threads, batch 2b                (the same work on both cores)
//   D  ZeRO-1, -2, -3 over 2 ranks, global batch 2b         (against B, DDP)
// Scaling efficiency t_A / t_B (1: the all-reduce and the replicas cost nothing), speedup
// t_C / t_B (DDP against threading the one model), the share of all-reduce time that
// backward hid: 1 - (time finish() waited) / (all-reduce time in the comm ledger), and for
// each ZeRO stage its step time and rank 0's peak memory (model states and in all) against
// DDP's.
// Exits 0 whatever the figures (DESIGN.md section 7).
//   bench_ddp [--layers N] [--d-model N] [--heads N] [--context N] [--batch b] [--steps N]
//             [--quick] [--json PATH]
#include <algorithm>
#include <cstdio>

#include "comm/mesh.h"
#include "common/bench_util.h"
#include "common/model_inputs.h"
#include "core/allocator.h"
#include "core/thread_pool.h"
#include "engine/trainer.h"
#include "parallel/ddp_strategy.h"

namespace dt::bench {
namespace {

struct Timed {
  double step_s = 0, exposed_s = 0, allreduce_s = 0;
  int64_t peak_states = 0, peak_all = 0;  // rank 0, from its ledger, over the timed steps
  int64_t wire_per_step = 0;              // rank 0 on dp
};

Timed time_steps(std::shared_ptr<comm::Mesh> mesh, const nn::GPTConfig& cfg, int64_t B, int warmup, int steps,
                 const std::string& what, int zero = 0) {
  nn::GPT model(cfg);
  optim::AdamW opt(model.parameters(), optim::AdamWOptions{});
  engine::TrainOptions o;
  o.max_grad_norm = 1.0;
  engine::ParallelOptions p;
  p.zero = zero;
  engine::Trainer t(mesh, model, opt, o, p);
  Batch b = random_batch(B, cfg.context, cfg.vocab_size, 7);
  std::vector<double> step_s, exposed, allreduce;
  int64_t wire0 = 0;
  auto wire_now = [&] {
    comm::Communicator* c = mesh ? mesh->find_comm(0, "dp") : nullptr;
    int64_t w = 0;
    for (int k = 0; c && k < comm::kNumCollKinds; ++k) w += c->ledger().get(static_cast<comm::CollKind>(k)).wire_bytes;
    return w;
  };
  for (int i = 0; i < warmup + steps; ++i) {
    progress(what, i + 1, warmup + steps, i < warmup ? "warm-up step" : "timed step");
    if (i == warmup) {
      reset_peaks(Device::cpu());
      wire0 = wire_now();
    }
    comm::Communicator* c = mesh ? mesh->find_comm(0, "dp") : nullptr;
    const double ar0 = c ? c->ledger().get(comm::CollKind::AllReduce).seconds : 0.0;
    const double t0 = now_s();
    t.train_step(b.in, b.tg);
    const double dt = now_s() - t0;
    if (i < warmup) continue;
    step_s.push_back(dt);
    if (const auto* ddp = t.replica(0).strategy<parallel::DdpStrategy>(); c && ddp) {
      exposed.push_back(ddp->buckets().exposed_seconds());
      allreduce.push_back(c->ledger().get(comm::CollKind::AllReduce).seconds - ar0);
    }
  }
  Timed r;
  r.step_s = median(step_s);
  r.wire_per_step = (wire_now() - wire0) / steps;
  if (const Ledger* l = mesh ? rank_ledger(Device::cpu(), 0) : nullptr) {
    r.peak_all = l->peak(DT_MEM_ALL);
    for (int32_t tag : {DT_MEM_PARAM, DT_MEM_GRAD, DT_MEM_OPTIMIZER}) r.peak_states += l->peak(tag);
  }
  if (!exposed.empty()) r.exposed_s = median(exposed), r.allreduce_s = median(allreduce);
  return r;
}

}  // namespace
}  // namespace dt::bench

int main(int argc, char** argv) {
  using namespace dt;
  using namespace dt::bench;
  const std::string usage =
      "usage: bench_ddp [--layers N] [--d-model N] [--heads N] [--context N] [--batch b] [--steps N]\n"
      "                 [--quick] [--json PATH] [--filter S]\n"
      "  default: gpt-small (6 layers, d_model 384, 6 heads, context 256), per-rank batch 4\n"
      "  --quick  2 layers, d_model 64, context 64, batch 2, 2 steps\n"
      "  --filter S  sections whose name contains S: anchors (A, C), ddp (B, always runs), zero (D);\n"
      "              e.g. --filter ddp runs B alone (bench/compare_pytorch.py does)\n";
  Options opt = parse_args(argc, argv, usage, {"layers", "d-model", "heads", "context", "batch", "steps"});
  auto flag = [&](const char* k, int64_t def) { return positive_flag(opt, k, def, usage, "bench_ddp"); };
  const nn::GPTConfig cfg = gpt_from_flags(opt, opt.quick ? GptShape{2, 64, 2, 64} : GptShape{6, 384, 6, 256},
                                                usage, "bench_ddp");
  const int64_t b = flag("batch", opt.quick ? 2 : 4);
  const int steps = static_cast<int>(flag("steps", opt.quick ? 2 : 8)), warmup = opt.quick ? 1 : 2;
  Report report("bench_ddp");
  const std::string load_before = load_average();
  std::printf("bench_ddp: %s, per-rank batch %lld x %lld tokens; load average at start: %s\n\n", cfg.str().c_str(),
              static_cast<long long>(b), static_cast<long long>(cfg.context), load_before.c_str());
  try {
    const bool anchors = selected(opt, "anchors"), zeros = selected(opt, "zero");
    const double tokens = static_cast<double>(2 * b * cfg.context);
    comm::BackendOptions bo;
    set_kernel_threads(1);
    const Timed d = time_steps(comm::Mesh::create("local", {2, 1, 1, 1, 1}, bo), cfg, 2 * b, warmup, steps,
                               "B: dp 2");
    // Waiting can exceed the ledger's time (queueing on the progress thread): then none was hidden.
    const double hidden = d.allreduce_s > 0 ? std::max(0.0, 1.0 - d.exposed_s / d.allreduce_s) : 0.0;
    report.add("ddp", "dp2").num("step_s", d.step_s).num("tokens_per_s", tokens / d.step_s)
        .num("allreduce_s", d.allreduce_s).num("exposed_s", d.exposed_s).num("hidden_fraction", hidden);
    auto print_b = [&] {
      std::printf("  B  dp 2 (DDP), global batch %lld: %8.1f ms/step, %.0f tokens/s\n", static_cast<long long>(2 * b),
                  d.step_s * 1e3, tokens / d.step_s);
    };
    if (!anchors) print_b();
    if (anchors) {
      const Timed a = time_steps(nullptr, cfg, b, warmup, steps, "A: 1 rank, 1 thread");
      set_kernel_threads(2);
      const Timed c = time_steps(nullptr, cfg, 2 * b, warmup, steps, "C: 1 rank, 2 threads");
      std::printf("\n  A  1 rank, 1 thread, batch %lld:   %8.1f ms/step\n", static_cast<long long>(b), a.step_s * 1e3);
      print_b();
      std::printf("  C  1 rank, 2 threads, batch %lld:  %8.1f ms/step, %.0f tokens/s\n", static_cast<long long>(2 * b),
                  c.step_s * 1e3, tokens / c.step_s);
      std::printf("\n  scaling efficiency t_A / t_B = %.3f (1: DDP costs nothing over one rank's share)\n", a.step_s / d.step_s);
      std::printf("  DDP vs threading one model: t_C / t_B = %.3f\n", c.step_s / d.step_s);
      std::printf("  all-reduce per step %.2f ms, of which waited for after backward %.2f ms: %.0f%% hidden\n",
                  d.allreduce_s * 1e3, d.exposed_s * 1e3, 100.0 * hidden);
      report.add("anchor", "one_rank_one_thread").num("step_s", a.step_s);
      report.add("anchor", "one_rank_two_threads").num("step_s", c.step_s).num("tokens_per_s", tokens / c.step_s);
      report.add("ratio", "scaling").num("efficiency", a.step_s / d.step_s).num("vs_threads", c.step_s / d.step_s);
    }
    if (zeros) {
      std::printf("\n  D  ZeRO over dp 2 against B (DDP): rank 0's peaks over the timed steps (param + grad +\n"
                  "     optimizer, and every tag), wire bytes per step on dp\n");
      std::printf("     %-6s %10s %8s %14s %8s %14s %12s %8s\n", "", "ms/step", "vs DDP", "states peak", "vs DDP",
                  "all peak", "wire/step", "vs DDP");
      auto row = [&](const char* name, const Timed& z) {
        std::printf("     %-6s %10.1f %8.3f %11.2f MB %8.3f %11.2f MB %9.2f MB %8.3f\n", name, z.step_s * 1e3, z.step_s / d.step_s,
                    static_cast<double>(z.peak_states) / 1e6, static_cast<double>(z.peak_states) / static_cast<double>(d.peak_states),
                    static_cast<double>(z.peak_all) / 1e6, static_cast<double>(z.wire_per_step) / 1e6,
                    static_cast<double>(z.wire_per_step) / static_cast<double>(d.wire_per_step));
      };
      row("DDP", d);
      for (int zero : {1, 2, 3}) {
        set_kernel_threads(1);
        const Timed z = time_steps(comm::Mesh::create("local", {2, 1, 1, 1, 1}, bo), cfg, 2 * b, warmup, steps,
                                   "D: dp 2, ZeRO-" + std::to_string(zero), zero);
        const std::string name = "zero" + std::to_string(zero);
        row(name.c_str(), z);
        report.add("zero", name).num("step_s", z.step_s).num("vs_ddp_time", z.step_s / d.step_s)
            .num("peak_states_bytes", static_cast<double>(z.peak_states)).num("peak_all_bytes", static_cast<double>(z.peak_all))
            .num("vs_ddp_states", static_cast<double>(z.peak_states) / static_cast<double>(d.peak_states))
            .num("wire_bytes_per_step", static_cast<double>(z.wire_per_step))
            .num("vs_ddp_wire", static_cast<double>(z.wire_per_step) / static_cast<double>(d.wire_per_step));
      }
      report.add("ddp", "dp2_memory").num("peak_states_bytes", static_cast<double>(d.peak_states))
          .num("peak_all_bytes", static_cast<double>(d.peak_all)).num("wire_bytes_per_step", static_cast<double>(d.wire_per_step));
    }
  } catch (const std::exception& e) {
    std::printf("failed: %s\n", e.what());
    report.note("ddp", "failed", e.what());
  }
  report.meta().str("model", cfg.str()).num("per_rank_batch", static_cast<double>(b)).flag("quick", opt.quick)
      .str("load_before", load_before).str("load_after", load_average());
  if (!opt.json_path.empty() && !report.write(opt.json_path)) return 1;
  return 0;
}
