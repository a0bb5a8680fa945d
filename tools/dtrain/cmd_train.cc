// dtrain train: trains a GPT on a dataset with a progress bar, writes metrics as JSON lines,
// a loss curve (SVG) and checkpoints into the run directory, resumes from it, and for a
// task with exact answers (addition) reports held-out accuracy at the end.
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint_meter.h"
#include "commands.h"
#include "flags.h"
#include "hf_args.h"
#include "model_args.h"
#include "report.h"

namespace dtcli {
namespace {

// Ctrl-C (or SIGTERM) cancels the running step through the C ABI's flag: the engine stops
// within a layer (one rank) or before the update (several), changing nothing, and the run
// saves the last completed step and exits 130. A second signal ends the process at once.
dt_cancel* g_interrupt = nullptr;
extern "C" void on_train_interrupt(int sig) {
  std::signal(sig, SIG_DFL);
  if (g_interrupt) dt_cancel_request(g_interrupt);
}

struct TrainArgs {
  ModelArgs model;
  std::string data = "addition";
  int64_t digits = 3, train_size = 1000000, context = 256;
  int64_t steps = 1000, batch = 32, micro_batches = 1, warmup = -1, seed = 1, threads = 0, dp = 1, tp = 1, zero = 0;
  int64_t ep = 1;  // expert-parallel ranks (a mixture of experts' experts split over them)
  int64_t cp = 1;  // context-parallel ranks (every sequence split over them, ring attention)
  bool sp = false;
  PipelineArgs pipe;
  int64_t timeout = 300;  // seconds
  double lr = 1e-3, weight_decay = 0.01, beta1 = 0.9, beta2 = 0.99, clip = 1.0, min_lr_ratio = 0.1;
  std::string schedule = "cosine";
  std::string out = "runs/latest", json, trace, backend = "local";
  std::string init, chat_template;  // --init hf:DIR: fine-tune a Hugging Face model
  int64_t save_every = 0, stop_at = 0, eval_problems = 500, show = 8;
  bool resume = false, no_progress = false, report = false, async_save = false;
};

// " over dp = 2 x tp = 2 ranks, DDP", " over dp = 2 x pp = 2 x tp = 2 ranks, DDP, tensor
// parallel, pipeline 1f1b", or "" for one rank: the layout, for the first line.
std::string layout(const TrainArgs& a) {
  const int64_t pp = a.pipe.pp;
  if (a.dp * a.tp * pp * a.ep * a.cp == 1) return "";
  std::string ranks = "dp = " + std::to_string(a.dp) + (pp > 1 ? " x pp = " + std::to_string(pp) : "") +
                      (a.ep > 1 ? " x ep = " + std::to_string(a.ep) : "") +
                      (a.cp > 1 ? " x cp = " + std::to_string(a.cp) : "") +
                      (a.tp > 1 ? " x tp = " + std::to_string(a.tp) : "");
  const std::string over = a.cp > 1 ? (a.dp > 1 ? " over dp x cp" : " over cp") : "";
  const std::string dp = a.ep > 1 ? (a.zero > 0 ? ", experts split over ep, ZeRO-" + std::to_string(a.zero) +
                                                     " over dp (the shared gradients summed over ep first)"
                                                   : ", experts split over ep, DDP over dp x ep")
                         : a.dp * a.cp == 1 ? ""
                         : a.zero > 0 ? ", ZeRO-" + std::to_string(a.zero) + over
                                      : ", DDP" + over;
  const std::string ring = a.cp > 1 ? ", ring attention over cp" : "";
  std::string pipeline;
  if (pp > 1) {
    pipeline = ", pipeline " + a.pipe.schedule_name() + " over " + std::to_string(a.micro_batches) + " micro-batches";
    if (a.pipe.virtual_stages > 1) pipeline += ", " + std::to_string(a.pipe.virtual_stages) + " virtual stages per rank";
  }
  return " over " + ranks + " ranks" + dp + ring + (a.tp > 1 ? (a.sp ? ", tensor + sequence parallel" : ", tensor parallel") : "") +
         pipeline;
}

// The (step, loss) pairs already in a run's metrics file, up to `last_step`; the file is
// rewritten without later lines (a crash after the last checkpoint leaves some).
std::vector<std::pair<int64_t, double>> resume_metrics(const std::string& path, int64_t last_step) {
  std::vector<std::pair<int64_t, double>> pts;
  std::ifstream f(path);
  std::string line, kept;
  while (std::getline(f, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("step") || j["step"].get<int64_t>() > last_step) continue;
    pts.emplace_back(j["step"].get<int64_t>(), j.value("loss", 0.0));
    kept += line + "\n";
  }
  f.close();
  write_file(path, kept);
  return pts;
}

// Sizes this machine cannot hold are refused before anything is allocated, with the estimate.
void refuse_too_big_run(const TrainArgs& a, bool addition) {
  if (addition) refuse_if_too_big("--train-size " + std::to_string(a.train_size), example_bytes(a.train_size), kExampleBytesWhy);
  // Addition examples are 3 * digits + 3 tokens, and the model has one position more.
  const double params = static_cast<double>(a.model.count_params(addition ? 3 * a.digits + 4 : a.context));
  // Under mpirun the world size, and so a ZeRO shard, is known only once the mesh is made:
  // then only the weights are checked (ModelArgs::create).
  if (a.backend == "mpi") return;
  // tp, pp, ep split the model: an upper bound
  const double ranks_here = static_cast<double>(a.dp * a.tp * a.pipe.pp * a.ep * a.cp);
  refuse_if_too_big("the model (" + std::to_string(static_cast<long long>(params)) + " parameters)",
                    ranks_here * stage_bytes(static_cast<int>(a.zero), params, static_cast<double>(a.dp * a.cp),
                                             state_bytes(a.model.precision)),
                    "weights, gradients and AdamW state of the " + std::to_string(static_cast<long long>(ranks_here)) +
                        " rank(s) in this process");
}

int run_train(TrainArgs a) {
  a.pipe.check();  // a pipeline flag without --pp >= 2 would be ignored
  // --resume with nothing to resume would quietly start over at step 0 (and overwrite the
  // run's metrics): refused before any work.
  if (a.resume && !std::filesystem::exists(a.out + "/ckpt.index.json"))
    throw UsageError("--resume: no checkpoint to resume in --out " + a.out + " (" + a.out +
                     "/ckpt.index.json is missing); accepted: the run directory of an earlier dtrain train, or "
                     "leave out --resume to start at step 0");
  if (a.threads > 0) {
    Options c = make_options();
    set(c.get(), "threads", a.threads);
    check(dt_configure(c.get()), "setting --threads");
  }
  DataSpec spec = parse_data_spec(a.data);
  const bool addition = spec.kind == "addition";
  // --init hf:DIR: the model, its weights and its tokenizer come from a Hugging Face directory.
  const std::string hf_dir = hf_init_dir(a.init);
  if (!a.init.empty() && hf_dir.empty())
    throw UsageError("--init \"" + a.init + "\"; accepted: hf:DIR (a Hugging Face model directory)");
  int64_t hf_context = 0;
  if (!hf_dir.empty()) {
    if (a.model.given())
      throw UsageError("--init hf:" + hf_dir + " gives the model's shape; leave out --model and the shape flags");
    if (addition) throw UsageError("--init hf:DIR fine-tunes on text: --data text:PATH or jsonl:PATH");
    const nlohmann::json info = hf_inspect(hf_dir);
    a.model.hf_config = info["config"];
    hf_context = info["config"]["context"].get<int64_t>();
    if (a.context > hf_context) {
      if (a.model.parsed->count("--context") > 0)
        throw UsageError("--context " + std::to_string(a.context) + " exceeds the model's context of " +
                         std::to_string(hf_context));
      a.context = hf_context;
    }
    spec.tokenizer = hf_dir;
    spec.chat_template = a.chat_template;
  } else if (spec.kind == "jsonl") {
    throw UsageError("--data jsonl:PATH is tokenized with a model's tokenizer: give --init hf:DIR");
  }
  refuse_too_big_run(a, addition);
  Dataset data = open_dataset(spec, a.context, a.digits, a.train_size, a.seed, "train");
  const int64_t T = dataset_context(data.get());
  // Addition: one more position than an example, so the answer's last token can be generated.
  Module model = hf_dir.empty() ? a.model.create(addition ? T + 1 : T, a.seed)
                                : load_hf_module(hf_dir, a.model.precision, 0);
  int64_t params = 0;
  check(dt_module_param_count(model.get(), &params), "dt_module_param_count");

  Options oo = make_options();
  set(oo.get(), "lr", a.lr);
  set(oo.get(), "weight_decay", a.weight_decay);
  set(oo.get(), "beta1", a.beta1);
  set(oo.get(), "beta2", a.beta2);
  dt_optimizer* opt_raw = nullptr;
  check(dt_optimizer_create(model.get(), "adamw", oo.get(), &opt_raw), "creating the optimizer");
  Optimizer opt(opt_raw);

  Options eo = make_options();
  set(eo.get(), "micro_batches", a.micro_batches);
  set(eo.get(), "max_grad_norm", a.clip);
  set(eo.get(), "schedule", a.schedule);
  if (a.zero > 0) set(eo.get(), "zero", a.zero);
  a.pipe.set_options(eo.get());  // pp_schedule, virtual_stages, pp_blocks (with --pp >= 2)
  if (a.sp) {
    if (a.tp < 2)
      throw CliError("--sp splits the tokens over the tensor-parallel ranks; accepted with --tp >= 2 (now --tp " +
                     std::to_string(a.tp) + ")");
    set_bool(eo.get(), "sequence_parallel", true);
  }
  if (a.schedule == "cosine") {
    set(eo.get(), "warmup_steps", a.warmup >= 0 ? a.warmup : std::min<int64_t>(100, a.steps / 10));
    set(eo.get(), "total_steps", a.steps);
    set(eo.get(), "min_lr_ratio", a.min_lr_ratio);
  }
  // --backend mpi: one rank per process of mpirun, all of them data parallel. Rank 0 prints
  // and writes the run's files; the others train alongside (their stdout goes nowhere).
  Mesh mesh;
  bool lead = true;
  if (a.backend == "mpi") {
    if (a.dp != 1) throw CliError("--dp with --backend mpi: the ranks are mpirun's processes (-np N); leave --dp out");
    dt_mesh* m = nullptr;
    Options mo = make_options();
    set(mo.get(), "timeout_ms", a.timeout * 1000);
    set(mo.get(), "tp", a.tp);  // dp: the world over tp x pp x ep
    set(mo.get(), "pp", a.pipe.pp);
    set(mo.get(), "ep", a.ep);
    set(mo.get(), "cp", a.cp);
    check(dt_mesh_create("mpi", 0, mo.get(), &m), "creating the mesh (--backend mpi: run under mpirun)");
    mesh.reset(m);
    int32_t world = 1, me = 0;
    check(dt_mesh_world_size(m, &world), "dt_mesh_world_size");
    check(dt_mesh_local_rank(m, 0, &me), "dt_mesh_local_rank");
    a.dp = world / (a.tp * a.pipe.pp * a.ep * a.cp);
    lead = me == 0;
    if (!lead && !std::freopen("/dev/null", "w", stdout)) throw CliError("cannot silence stdout of rank " + std::to_string(me));
    if (!lead && !a.trace.empty()) a.trace += ".rank" + std::to_string(me) + ".json";  // each process its own
  } else if (a.backend != "local") {
    throw CliError("--backend \"" + a.backend + "\"; accepted: local (--dp ranks as threads), mpi (under mpirun)");
  }
  if (a.zero > 0 && a.dp * a.cp < 2)
    throw CliError("--zero " + std::to_string(a.zero) + " shards over the data-parallel ranks; accepted with --dp >= 2 "
                   "(or --backend mpi under mpirun -np >= 2; one rank has nothing to shard)");
  // --dp N --pp P --ep E --cp C --tp M: N x P x E x C x M ranks of this process (the local backend), tp innermost.
  if (a.dp * a.tp * a.pipe.pp * a.ep * a.cp > 1 && !mesh) {
    Options mo = make_options();
    set(mo.get(), "dp", a.dp);
    set(mo.get(), "pp", a.pipe.pp);
    set(mo.get(), "ep", a.ep);
    set(mo.get(), "cp", a.cp);
    set(mo.get(), "tp", a.tp);
    set(mo.get(), "timeout_ms", a.timeout * 1000);
    dt_mesh* m = nullptr;
    check(dt_mesh_create("local", static_cast<int32_t>(a.dp * a.tp * a.pipe.pp * a.ep * a.cp), mo.get(), &m),
          "creating the mesh (--dp, --pp, --ep, --cp, --tp)");
    mesh.reset(m);
  }
  dt_engine* eng_raw = nullptr;
  check(dt_engine_create(mesh.get(), model.get(), opt.get(), eo.get(), &eng_raw),
        a.pipe.pp > 1 ? "creating the engine (" + a.pipe.flags_text() + ")" : std::string("creating the engine"));
  Engine engine(eng_raw);
  // --report's peaks are those of training, not of building the replicas.
  check(dt_memory_reset_peak("cpu"), "dt_memory_reset_peak");

  Options lo = make_options();
  set(lo.get(), "batch", a.batch);
  set(lo.get(), "seed", a.seed);
  dt_loader* loader_raw = nullptr;
  check(dt_loader_create(data.get(), lo.get(), &loader_raw), "creating the data loader (--batch)");
  Loader loader(loader_raw);

  std::filesystem::create_directories(a.out);
  if (!hf_dir.empty() && lead) record_hf_source(a.out, hf_dir);  // dtrain export writes its tokenizer back
  FailureReport on_failure(mesh.get(), a.report, a.out);  // --report: hang forensics if this scope unwinds
  const std::string ckpt = a.out + "/ckpt", metrics_path = a.out + "/metrics.jsonl", svg = a.out + "/loss.svg";
  std::vector<std::pair<int64_t, double>> curve;
  int64_t step = 0;
  CheckpointMeter ckpt_meter(engine.get(), ckpt);
  if (a.resume) {  // its checkpoint exists: checked at the start
    ckpt_meter.load();
    check(dt_engine_step(engine.get(), &step), "dt_engine_step");
    // One batch per step, so the data position is a function of the step.
    int64_t per_epoch = 0;
    check(dt_loader_batches_per_epoch(loader.get(), &per_epoch), "dt_loader_batches_per_epoch");
    check(dt_loader_seek(loader.get(), step / per_epoch, step % per_epoch), "dt_loader_seek");
    if (lead) {
      curve = resume_metrics(metrics_path, step);
      std::fprintf(stderr, "resumed %s at step %lld\n", ckpt.c_str(), static_cast<long long>(step));
    }
  } else if (lead) {
    write_file(metrics_path, "");
  }
  std::printf("model: %lld parameters; data: %s, %lld examples of %lld tokens; %lld steps of batch %lld%s\n",
              static_cast<long long>(params), a.data.c_str(), static_cast<long long>(dataset_size(data.get())),
              static_cast<long long>(T), static_cast<long long>(a.steps), static_cast<long long>(a.batch),
              layout(a).c_str());
  std::fflush(stdout);

  std::ofstream metrics;  // rank 0's alone under mpirun
  if (lead) metrics.open(metrics_path, std::ios::app);
  nlohmann::json training_peaks;  // --report: each rank's peaks over the steps, by tag
  // --report measures the run against the library's plan of it by formula (engine/plan.cc):
  // under tp each rank's model is its part, and what tp moves per step (micro-batches of
  // batch / dp / ep / micro_batches); under pp each rank holds its stage (placed as the
  // Trainer places them, the schedule simulated for the bubble and peaks); under ep and cp
  // the groups its gradients cross.
  nlohmann::json plan, pipeline;
  if (a.report) {
    plan = a.model.plan(addition ? T + 1 : T, a.dp, a.tp, a.sp, a.batch / (a.dp * a.ep * a.micro_batches), T,
                        a.micro_batches, &a.pipe, false, a.ep, a.cp);
    if (plan.contains("pipeline")) {
      pipeline = plan["pipeline"];
      plan.erase("pipeline");
    }
  }
  GradTraffic traffic(plan, pipeline, static_cast<int>(a.zero));  // --report's traffic per train step
  TrafficMeter tp_traffic("tp");
  PipeMeter pipe_meter;                    // --report with --pp: each step's bubble and activation peaks
  MoeMeter moe_meter;                      // --report with experts: each step's routing
  CpMeter cp_meter;                        // --report with --cp: the ring's bytes
  Tensor in = make_batch(a.batch, T), tg = make_batch(a.batch, T);
  Progress bar(a.steps, step, !a.no_progress && lead);
  double loss = 0.0, smooth = NAN, tokens_per_s = 0.0;
  const double t0 = now_seconds();
  const int64_t first = step;
  if (!a.trace.empty()) check(dt_trace_enable(1), "starting the trace");
  // --stop-at ends this run early (saved, resumable) without changing the schedule, which
  // --steps sets for the whole run.
  const int64_t last = a.stop_at > 0 ? std::min(a.stop_at, a.steps) : a.steps;
  std::unique_ptr<dt_cancel, Deleter<dt_cancel, dt_cancel_destroy>> interrupt;
  {
    dt_cancel* c = nullptr;
    check(dt_cancel_create(&c), "dt_cancel_create");
    interrupt.reset(c);
    check(dt_engine_set_cancel(engine.get(), c), "dt_engine_set_cancel");
    g_interrupt = c;
    std::signal(SIGINT, on_train_interrupt);
    std::signal(SIGTERM, on_train_interrupt);
  }
  bool interrupted = false;
  while (step < last) {
    if (const dt_status rs = dt_loader_next(loader.get(), in.get(), tg.get()); rs != DT_OK) {
      // The data failed mid-run (a token file truncated while in use: DT_ERR_IO): keep what
      // the run has, as a clean stop does, then fail. Under mpirun the save is collective
      // and the other ranks may not have failed, so there the last --save-every stands.
      const std::string why = std::string(dt_last_error_message()) + " [" + dt_status_string(rs) + "]";
      g_interrupt = nullptr;
      std::signal(SIGINT, SIG_DFL);
      std::signal(SIGTERM, SIG_DFL);
      bar.finish("data failed");
      std::string kept = "nothing new to save";
      if (step > first && a.backend != "mpi") {
        if (lead) metrics.flush();
        ckpt_meter.save();
        if (lead) write_loss_svg(svg, curve, "dtrain train: " + a.data);
        kept = "saved step " + std::to_string(step) + " to " + ckpt + ".index.json; go on with --resume once the data is whole";
      } else if (step > first) {
        kept = "not saved (under mpirun the save is collective; the last --save-every checkpoint stands)";
      }
      throw CliError("reading the batch of step " + std::to_string(step + 1) + ": " + why + "; " + kept);
    }
    traffic.before(mesh.get());
    if (a.tp > 1) tp_traffic.before(mesh.get());
    if (a.pipe.pp > 1) pipe_meter.before(mesh.get());
    if (a.cp > 1) cp_meter.before(mesh.get());
    const dt_status st = dt_engine_train_step(engine.get(), in.get(), tg.get(), &loss);
    if (st == DT_ERR_CANCELLED) {
      interrupted = true;
      break;
    }
    check(st, "training step " + std::to_string(step + 1));
    traffic.after(mesh.get());
    if (a.tp > 1) tp_traffic.after(mesh.get());
    if (a.pipe.pp > 1) pipe_meter.after(mesh.get());
    if (a.cp > 1) cp_meter.after(mesh.get(), 1);
    ++step;
    const std::string line = read_text([&](char* b, size_t c, size_t* n) { return dt_engine_last_stats_json(engine.get(), b, c, n); },
                                       "dt_engine_last_stats_json");
    if (lead) metrics << line << "\n";
    if (a.report && a.pipe.pp > 1) pipe_meter.add_step(line);
    if (a.report) moe_meter.add_step(line);
    curve.emplace_back(step, loss);
    smooth = std::isnan(smooth) ? loss : 0.95 * smooth + 0.05 * loss;
    tokens_per_s = static_cast<double>((step - first) * a.batch * T) / (now_seconds() - t0);
    char status[96];
    std::snprintf(status, sizeof status, "loss %.4f | %.0f tok/s", smooth, tokens_per_s);
    bar.update(step, status);
    if (a.report && step == last) training_peaks = rank_peaks(mesh.get());  // before the final save
    if ((a.save_every > 0 && step % a.save_every == 0) || step == last) {
      if (lead) metrics.flush();  // the metrics of every saved step are on disk before the checkpoint
      if (a.async_save && step != last) ckpt_meter.save_async();  // collective; the next step commits it
      else ckpt_meter.save();  // collective
      if (lead) write_loss_svg(svg, curve, "dtrain train: " + a.data);
    }
  }
  g_interrupt = nullptr;
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (interrupted) {
    bar.finish("interrupted");
    if (step > first) {
      if (lead) metrics.flush();
      ckpt_meter.save();
      if (lead) write_loss_svg(svg, curve, "dtrain train: " + a.data);
    }
    std::printf("interrupted during step %lld: the step was cancelled and changed nothing; %s\n",
                static_cast<long long>(step + 1),
                step > first ? ("saved step " + std::to_string(step) + " to " + ckpt + ".index.json; go on with --resume").c_str()
                             : "nothing new to save");
    std::fflush(stdout);
    return 130;
  }
  if (first < last) {
    char status[96];
    std::snprintf(status, sizeof status, "loss %.4f | %.0f tok/s", smooth, tokens_per_s);
    bar.finish(status);
  }
  const double train_s = now_seconds() - t0;
  if (!a.trace.empty()) {
    check(dt_trace_enable(0), "stopping the trace");
    check(dt_trace_write(a.trace.c_str()), "writing the trace");
    std::printf("wrote %s (Chrome trace: open it in https://ui.perfetto.dev)\n", a.trace.c_str());
  }
  std::printf("trained %lld steps in %.1f s (%.0f tokens/s); final loss %.4f\n", static_cast<long long>(step - first),
              train_s, tokens_per_s, loss);
  std::printf("wrote %s (JSON lines), %s (loss curve), %s.index.json (checkpoint)\n", metrics_path.c_str(), svg.c_str(),
              ckpt.c_str());

  nlohmann::json summary = {{"steps", step},       {"steps_this_run", step - first}, {"final_loss", loss},
                            {"train_seconds", train_s}, {"tokens_per_s", tokens_per_s}, {"params", params},
                            {"checkpoint", ckpt},  {"metrics", metrics_path},      {"loss_svg", svg},
                            {"checkpoint_io", ckpt_meter.json()}};
  if (a.report) {
    std::printf("\nreport: checkpoints (every rank writes its own file; dtrain checkpoint inspect %s)\n", a.out.c_str());
    ckpt_meter.print();
  }
  if (a.report) {
    summary["report"] = print_report(mesh.get(), traffic, plan, static_cast<int>(a.zero), step - first,
                                     a.tp > 1 ? &tp_traffic : nullptr, pipeline);
    if (a.pipe.pp > 1) summary["report"]["pipeline"] = print_pipeline_report(mesh.get(), pipe_meter, pipeline);
    if (moe_meter.any()) summary["report"]["moe"] = moe_meter.print();
    if (a.cp > 1) summary["report"]["cp"] = cp_meter.print(mesh.get(), plan["cp"]);
  }
  if (a.report) {  // per rank, every layout: all memory and by tag, before the final save (bench_plan.py reads them)
    nlohmann::json& all = summary["report"]["training_peak_bytes"] = nlohmann::json::object();
    for (const auto& [rank, tags] : training_peaks.items()) all[rank] = tags["all"];
    summary["report"]["training_peak_bytes_by_tag"] = training_peaks;
  }
  if (addition && a.eval_problems > 0 && step == a.steps) {
    Dataset test = open_dataset(spec, a.context, a.digits, a.eval_problems, a.seed + 1, "test");
    std::printf("held-out problems (never in training), answered by greedy generation:\n");
    ExactMatch em = exact_match(engine.get(), test.get(), a.eval_problems, a.show, true);
    const double acc = em.total ? static_cast<double>(em.right) / static_cast<double>(em.total) : 0.0;
    std::printf("exact match: %lld / %lld = %.1f%% of held-out %lld-digit additions (%.1f s)\n",
                static_cast<long long>(em.right), static_cast<long long>(em.total), 100.0 * acc,
                static_cast<long long>(a.digits), em.seconds);
    summary["exact_match"] = {{"right", em.right}, {"total", em.total}, {"accuracy", acc}, {"seconds", em.seconds}};
  }
  if (!a.json.empty() && lead) write_file(a.json, summary.dump(2) + "\n");
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* c = app.add_subcommand("train", "Train a GPT; writes metrics, a loss curve and checkpoints");
  c->footer(
      "Examples:\n"
      "  dtrain train --data addition --digits 3 --layers 2 --d-model 128 --heads 4 --steps 2000 --batch 64 --lr 3e-3\n"
      "  dtrain train --data text:book.txt --context 128 --model gpt-small --steps 500 --out runs/book\n"
      "  dtrain train ... --resume          (continue the run in --out from its checkpoint)\n"
      "  dtrain train --layers 4 --pp 2 --tp 2 --dp 2 --micro-batches 4 --pp-schedule 1f1b --report   (8 ranks)\n"
      "  dtrain train --init hf:models/SmolLM2-135M --data jsonl:chats.jsonl --context 512 --tp 2 --steps 100 --out runs/ft\n"
      "  dtrain export --checkpoint runs/ft/ckpt --hf out/SmolLM2-ft   (back to a Hugging Face directory)");
  a->model.add_to(*c);
  c->add_option("--init", a->init,
                "hf:DIR: fine-tune the Hugging Face model in DIR (its weights, shape and tokenizer; export with "
                "dtrain export)")
      ->group("Model");
  c->add_option("--data", a->data,
                "addition | text:PATH (bytes; with --init hf: the model's tokens) | jsonl:PATH (with --init hf: "
                "lines of {\"text\": ...} or chat {\"messages\": [...]}, the loss on assistant turns) | "
                "tokens:PATH[:2|:4] (u16/u32 ids)")
      ->capture_default_str()->group("Data");
  c->add_option("--chat-template", a->chat_template,
                "With --init hf and jsonl conversations: a built-in template instead of the model's (chatml, "
                "llama3, llama2, mistral, zephyr)")
      ->group("Data");
  add_int(c, "--digits", a->digits, {1, 18}, "Operand digits for --data addition")->group("Data");
  add_int(c, "--train-size", a->train_size, {1, kMaxExamples}, "Training problems for --data addition")->group("Data");
  add_int(c, "--context", a->context, {1, 65536}, "Tokens per example for text and token files")->group("Data");
  add_int(c, "--steps", a->steps, {1, 1000000000}, "Optimizer steps in all (a resumed run continues to it)");
  add_int(c, "--batch", a->batch, {1, 65536}, "Examples per step");
  add_int(c, "--dp", a->dp, {1, 1024}, "Data-parallel ranks in this process (DDP; --batch is the global batch)");
  add_int(c, "--tp", a->tp, {1, 1024},
          "Tensor-parallel ranks per data-parallel rank (attention heads and MLP features split; --dp x --tp ranks)");
  add_int(c, "--ep", a->ep, {1, 1024},
          "Expert-parallel ranks: a mixture of experts' experts split over them (needs --experts divisible by it), "
          "each routing its own share of --batch; --dp x --ep x ... ranks");
  add_int(c, "--cp", a->cp, {1, 1024},
          "Context-parallel ranks: every sequence split over them (ring attention; each holds 2 of 2 x cp chunks), "
          "--batch's rows shared; --dp x --cp x ... ranks");
  c->add_flag("--sp", a->sp,
              "Sequence parallel over the --tp ranks (Megatron SP): norms and the residual stream split over tokens");
  c->add_option("--backend", a->backend, "local: --dp ranks as threads of this process; mpi: one rank per process of mpirun")
      ->capture_default_str();
  add_int(c, "--timeout", a->timeout, {1, 86400},
          "Seconds a rank waits in a collective for the others (--dp or --backend mpi) before the run fails");
  add_int(c, "--zero", a->zero, {0, 3},
          "ZeRO stage over the --dp ranks: 0 DDP, 1 optimizer state sharded, 2 + grads, 3 + weights (FSDP)");
  add_int(c, "--micro-batches", a->micro_batches, {1, 65536},
          "Gradient accumulation: micro-batches per step (divides --batch); with --pp the pipeline's M");
  a->pipe.add_to(*c);
  add_real(c, "--lr", a->lr, {0, 10}, "Peak learning rate (AdamW)")->group("Optimizer");
  c->add_option("--schedule", a->schedule, "cosine (linear warmup, cosine decay) or constant")->capture_default_str()->group("Optimizer");
  add_int(c, "--warmup", a->warmup, {0, 1000000000}, "Warmup steps, below --steps (default: min(100, steps / 10))")
      ->group("Optimizer");
  add_real(c, "--min-lr-ratio", a->min_lr_ratio, {0, 1}, "Final lr as a fraction of --lr")->group("Optimizer");
  add_real(c, "--weight-decay", a->weight_decay, {0, 1}, "Decoupled weight decay")->group("Optimizer");
  add_real(c, "--beta1", a->beta1, {0, 0.999999}, "AdamW beta1")->group("Optimizer");
  add_real(c, "--beta2", a->beta2, {0, 0.999999}, "AdamW beta2")->group("Optimizer");
  add_real(c, "--clip", a->clip, {0, 1e6, "no clipping"}, "Clip the global gradient norm to this")->group("Optimizer");
  add_int(c, "--seed", a->seed, {0, INT64_MAX}, "Seed for weights, data order and the problems");
  add_int(c, "--threads", a->threads, {1, 1024, "all cores"}, "CPU threads for the kernels");
  c->add_option("--out", a->out, "Run directory: metrics.jsonl, loss.svg, ckpt.*")->capture_default_str()->group("Output");
  add_int(c, "--save-every", a->save_every, {1, 1000000000, "only at the end"}, "Also checkpoint every N steps")
      ->group("Output");
  add_int(c, "--stop-at", a->stop_at, {1, 1000000000, "run to --steps"},
          "End this run at this step, saved (resume later with --resume)")
      ->group("Output");
  c->add_flag("--resume", a->resume, "Continue from the checkpoint in --out (bitwise the same as not stopping)")->group("Output");
  c->add_flag("--async-save", a->async_save,
              "Write the --save-every checkpoints while training goes on (the state copied first; the last save waits)")
      ->group("Output");
  add_int(c, "--eval-problems", a->eval_problems, {0, kMaxProblems, "none"},
          "Held-out problems to answer at the end (addition)")
      ->group("Output");
  add_int(c, "--show", a->show, {0, kMaxProblems}, "Held-out problems to print")->group("Output");
  c->add_option("--json", a->json, "Also write the summary as JSON to this file")->group("Output");
  c->add_flag("--no-progress", a->no_progress, "No progress bar")->group("Output");
  c->add_option("--trace", a->trace, "Write a Chrome trace (compute, each collective, waiting per rank) to this file")
      ->group("Output");
  c->add_flag("--report", a->report, "Print the memory and communication ledgers next to their formulas")
      ->group("Output");
  c->callback([a] { throw Exit{run_train(*a)}; });
}

}  // namespace dtcli
