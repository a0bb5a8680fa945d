#!/usr/bin/env python3
"""The planner against measurement: for each configuration (a model and a layout that runs on
this machine), `dtrain plan --cluster C` predicts the step time and each rank's peak memory,
and `dtrain train --report` measures them (the fastest step after two warm-up steps; the
ledger's peak of all memory per rank over the steps, before the final save). Prints the table,
the error statistics (mean and worst relative error, how many within 10% for time and 5% for
memory) and Kendall's tau between the predicted and the measured ranking of the layouts by
step time (per model, then pooled). The models include a mixture of experts (its layouts with
ep), and the dense ones add context-parallel layouts (cp). Under ep the busiest rank's rows
are the router's: the plan takes them (--expert-load, --expert-load-peak) as the mixture's
one-rank run measured them (its --report), and the measured step is the median (the work
changes with the routing from step to step, so the fastest is the best-balanced).

The cluster is this machine calibrated in the same run (`dtrain plan --calibrate`, and under
mpirun -np 2 its processes' link), unless --cluster names one: once before the first run and
again after every run. Each prediction is made on the field-wise median of the calibrations
around its measurement (`dtrain plan --median-of`: the one taken seconds after it and the
--window - 1 before it; a single calibration's fitted figures, differences of best-of timings,
move by up to 20% within a minute here). A run counts as steady when the calibration after it
finds the machine as fast as the one before (one core's GEMM rate and the pool's speed-up
within --drift) and the hypervisor took at most --max-steal of the CPU time while it ran
(/proc/stat). A shared host's speed moves by up to 30% over minutes, so a run that is not
steady is repeated (--retries), and kept marked unsteady if it never settles.

    python3 bench/bench_plan.py [--dtrain build/default/dtrain] [--cluster FILE] [--steps 16]
        [--repeats 1] [--drift 0.05] [--max-steal 0.05] [--retries 2] [--window 5] [--quick] [--only SUBSTRING] [--json out.json]

--json writes {"clusters": [{"pass", "model", "layout", "cluster"}], "configurations": [{"layout", "model",
"predicted_step_s", "measured_step_s", "predicted_peak_bytes", "measured_peak_bytes", "steady", ...}],
"summary": {...}}.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MODELS = {
    # name: dtrain model flags (f32, the training default), and the context
    "gpt-small": (["--model", "gpt-small", "--precision", "f32"], 128),
    "gpt-4x256": (["--model", "gpt-small", "--layers", "4", "--d-model", "256", "--heads", "4", "--precision", "f32"], 128),
    "llama-4x256": (["--model", "llama-tiny", "--layers", "4", "--d-model", "256", "--heads", "4", "--kv-heads", "2",
                     "--vocab", "512", "--precision", "f32"], 128),
    # a mixture of experts: llama-4x256's attention, 4 experts of d_ff 512 each, top 2
    "moe-4x256": (["--model", "mixtral-tiny", "--layers", "4", "--d-model", "256", "--heads", "4", "--kv-heads", "2",
                   "--d-ff", "512", "--vocab", "512", "--precision", "f32"], 128),
}

# (name, batch per step, layout flags, mpi processes or 0)
LAYOUTS = [
    ("1 rank", 8, [], 0),
    ("1 rank, 2 micro-batches", 8, ["--micro-batches", "2"], 0),
    ("dp 2 DDP", 8, ["--dp", "2"], 0),
    ("dp 2 ZeRO-1", 8, ["--dp", "2", "--zero", "1"], 0),
    ("dp 2 ZeRO-2", 8, ["--dp", "2", "--zero", "2"], 0),
    ("dp 2 ZeRO-3", 8, ["--dp", "2", "--zero", "3"], 0),
    ("tp 2", 8, ["--tp", "2"], 0),
    ("tp 2 + SP", 8, ["--tp", "2", "--sp"], 0),
    ("pp 2 1f1b M4", 8, ["--pp", "2", "--micro-batches", "4"], 0),
    ("pp 2 gpipe M4", 8, ["--pp", "2", "--micro-batches", "4", "--pp-schedule", "gpipe"], 0),
    ("pp 2 zb-h1 M4", 8, ["--pp", "2", "--micro-batches", "4", "--pp-schedule", "zb-h1"], 0),
    ("pp 2 interleaved v2 M4", 8, ["--pp", "2", "--micro-batches", "4", "--pp-schedule", "interleaved",
                                   "--virtual-stages", "2"], 0),
    ("dp 2 x tp 2 x pp 2", 8, ["--dp", "2", "--tp", "2", "--pp", "2", "--micro-batches", "2"], 0),
    ("1 rank, recompute", 8, ["--recompute"], 0),
    ("dp 2 ZeRO-1, recompute", 8, ["--dp", "2", "--zero", "1", "--recompute"], 0),
    ("pp 2 1f1b M4, recompute", 8, ["--pp", "2", "--micro-batches", "4", "--recompute"], 0),
    ("dp 2 mpi", 8, [], 2),
    ("dp 2 x tp 2 x pp 2 mpi", 8, ["--tp", "2", "--pp", "2", "--micro-batches", "2"], 8),
]
# Context parallelism on the dense models (every sequence split over the ranks).
CP_LAYOUTS = [
    ("cp 2", 8, ["--cp", "2"], 0),
    ("dp 2 x cp 2 ZeRO-1", 8, ["--dp", "2", "--cp", "2", "--zero", "1"], 0),
]
# The mixture of experts: its experts split over ep, beside the layouts every model has.
MOE_LAYOUTS = [
    ("1 rank", 8, [], 0),
    ("dp 2 DDP", 8, ["--dp", "2"], 0),
    ("ep 2", 8, ["--ep", "2"], 0),
    ("ep 4", 8, ["--ep", "4"], 0),
    ("dp 2 x ep 2 ZeRO-1", 8, ["--dp", "2", "--ep", "2", "--zero", "1"], 0),
    ("tp 2 + SP", 8, ["--tp", "2", "--sp"], 0),
    ("pp 2 1f1b M4", 8, ["--pp", "2", "--micro-batches", "4"], 0),
    ("ep 2 mpi", 8, ["--ep", "2"], 2),
]
QUICK = {"1 rank", "dp 2 ZeRO-1", "tp 2", "pp 2 1f1b M4"}


def layouts_of(model):
    return MOE_LAYOUTS if model.startswith("moe") else LAYOUTS + CP_LAYOUTS


def flag(flags, name, default):
    return flags[flags.index(name) + 1] if name in flags else default


def plan_flags(layout, procs, batch):
    """The same layout for dtrain plan: per-rank micro-batch and count, the backend."""
    split = 1
    for f in ("--tp", "--pp", "--ep", "--cp"):
        split *= int(flag(layout, f, 1))
    dp = procs // split if procs else int(flag(layout, "--dp", 1))
    ep = int(flag(layout, "--ep", 1))  # ep ranks route their own rows: the batch splits over dp x ep
    m = int(flag(layout, "--micro-batches", 1))
    out = ["--dp", str(dp), "--micro-batch", str(batch // dp // ep // m), "--micro-batches", str(m)]
    for f in ("--tp", "--pp", "--ep", "--cp", "--zero", "--pp-schedule", "--virtual-stages"):
        if f in layout:
            out += [f, flag(layout, f, None)]
    for f in ("--sp", "--recompute"):
        if f in layout:
            out.append(f)
    if procs:
        out += ["--backend", "mpi"]
    return out


def cpu_jiffies():
    """This host's CPU time so far, (steal, all), in jiffies from /proc/stat ((0, 0) where there
    is none). Steal is the time a virtual CPU was ready to run while the hypervisor ran another
    guest: on a shared host, the time a step loses that no model of the machine can see."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return (v[7], sum(v)) if len(v) == 8 else (0, 0)
    except (OSError, ValueError):
        return 0, 0


def steal_of(start):
    """The fraction of the host's CPU time stolen since cpu_jiffies() read `start`."""
    now = cpu_jiffies()
    return (now[0] - start[0]) / (now[1] - start[1]) if now[1] > start[1] else 0.0


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError("failed: " + " ".join(cmd) + "\n" + r.stdout[-2000:] + r.stderr[-2000:])
    return r.stdout


def kendall_tau(a, b):
    n, s = len(a), 0
    for i in range(n):
        for j in range(i + 1, n):
            x = (a[i] - a[j]) * (b[i] - b[j])
            s += 1 if x > 0 else -1 if x < 0 else 0
    return s / (n * (n - 1) / 2) if n > 1 else float("nan")


def summarize(rows):
    """The error statistics of a table's rows (bench/plan_table.py reuses this)."""
    te = [abs(r["step_error"]) for r in rows]
    me = [abs(r["peak_error"]) for r in rows]
    taus = {}
    for m in dict.fromkeys(r["model"] for r in rows):
        rs = [r for r in rows if r["model"] == m]
        taus[m] = kendall_tau([r["predicted_step_s"] for r in rs], [r["measured_step_s"] for r in rs])
    return {"configurations": len(rows), "unsteady_kept": sum(not r.get("steady", True) for r in rows),
            "step_mean_abs_error": statistics.mean(te), "step_max_abs_error": max(te),
            "step_within_10pct": sum(e <= 0.10 for e in te),
            "peak_mean_abs_error": statistics.mean(me), "peak_max_abs_error": max(me),
            "peak_within_5pct": sum(e <= 0.05 for e in me),
            "kendall_tau_per_model": taus,
            "kendall_tau_pooled": kendall_tau([r["predicted_step_s"] for r in rows],
                                              [r["measured_step_s"] for r in rows])}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtrain", default="build/default/dtrain")
    ap.add_argument("--cluster", default="")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=1,
                    help="passes over every configuration; the fastest steady pass counts, against its own "
                         "prediction")
    ap.add_argument("--drift", type=float, default=0.05,
                    help="a run counts as steady when the calibrations before and after it agree this closely "
                         "(one core's GEMM rate and the pool's speed-up)")
    ap.add_argument("--retries", type=int, default=2, help="runs again of a configuration the machine drifted during")
    ap.add_argument("--max-steal", type=float, default=0.05,
                    help="a run counts as steady only if the hypervisor stole at most this share of the host's CPU "
                         "time while it ran (/proc/stat; one run of 68 here lost 28%%)")
    ap.add_argument("--window", type=int, default=5,
                    help="predict each run on the field-wise median of this many calibrations: the one after it "
                         "and those before it (0: the one before it alone)")
    ap.add_argument("--verbose", action="store_true", help="print every calibration (the first is always printed)")
    ap.add_argument("--quick", action="store_true", help="four layouts of one model (the ctest)")
    ap.add_argument("--only", default="")
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--json", default="")
    ap.add_argument("--estimator", choices=["min", "median"], default="min",
                    help="a configuration's step time: its fastest steady step (default) or the median one")
    a = ap.parse_args()
    dtrain = os.path.abspath(a.dtrain)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.setdefault("OPENBLAS_CORETYPE", "Haswell")
    tmp = tempfile.mkdtemp(prefix="bench_plan_")

    def speed(c):  # what drifts on a shared host: one core's GEMM rate and the pool's speed-up
        return c["matmul_flops_f32"], c["pool_speedup"]

    def drift(c1, c2):
        return max(abs(b / a - 1) for a, b in zip(speed(c1), speed(c2)))

    clusters = []
    data = os.path.join(tmp, "data.txt")
    with open(data, "w") as f:
        f.write(("the planner predicts every layout's step time and memory before it runs. " * 400))
    rows = []
    models = [m for m in a.models if m in MODELS][: 1 if a.quick else None]
    todo = [(m, l) for m in models for l in layouts_of(m) if (not a.quick or l[0] in QUICK) and a.only in m + " " + l[0]]
    tries = {}
    loads = {}  # model -> {ep: the busiest ep rank's rows over an even share}, from its one-rank run
    n_cal = [0]
    cal_steal = {}  # a calibration's file -> the fraction of CPU time stolen while it ran
    history = []    # every calibration's file, oldest first (--window)

    def fresh_cluster(mpi):
        """This machine now (and under mpirun -np 2 its processes' link when a layout needs it),
        into a file of its own (the prediction it serves reads that file): (path, cluster)."""
        n_cal[0] += 1
        path = os.path.join(tmp, "cluster%d.json" % n_cal[0])
        start = cpu_jiffies()
        out = run([dtrain, "plan", "--calibrate", "--json", path], env)
        if mpi:
            out += run(["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none", dtrain, "plan", "--calibrate",
                        "--backend", "mpi", "--json", path], env)
        cal_steal[path] = steal_of(start)
        history.append(path)
        if n_cal[0] == 1 or a.verbose:
            print(out.strip(), flush=True)
        return path, json.load(open(path))

    def predict(i, mname, batch, layout, procs, cluster):
        """One configuration's plan on `cluster`: (cost, load flags)."""
        mflags, ctx = MODELS[mname]
        out = os.path.join(tmp, "plan%d.json" % i)
        # A mixture under ep: the busiest rank's rows as the model's one-rank run routed
        # them (its --report measures every ep; each layout routes the same tokens alike).
        ep = flag(layout, "--ep", "1")
        load = []
        if ep != "1" and ep in loads.get(mname, {}):
            load = ["--expert-load", "%.4f" % loads[mname][ep]["typical_step"],
                    "--expert-load-peak", "%.4f" % loads[mname][ep]["peak"]]
        run([dtrain, "plan"] + mflags + ["--context", str(ctx), "--cluster", cluster, "--json", out] +
            plan_flags(layout, procs, batch) + load, env)
        return json.load(open(out))["cost"], load

    def measure(i, mname, lname, batch, layout, procs, cluster):
        """One configuration: the plan on `cluster`, then the run; (measured s, cost, peak, load flags)."""
        mflags, ctx = MODELS[mname]
        cost, load = predict(i, mname, batch, layout, procs, cluster)
        ep = flag(layout, "--ep", "1")
        summ = os.path.join(tmp, "train%d.json" % i)
        rundir = os.path.join(tmp, "run%d" % i)
        train = [dtrain, "train"] + mflags + ["--data", "text:" + data, "--context", str(ctx), "--batch",
                                              str(batch), "--steps", str(a.steps), "--no-progress", "--report",
                                              "--json", summ, "--eval-problems", "0", "--show", "0", "--out",
                                              rundir] + layout
        if procs:  # a process per rank, one kernel thread each (as rank threads run in one process)
            train = ["mpirun", "-np", str(procs), "--oversubscribe", "--bind-to", "none"] + train + \
                ["--backend", "mpi", "--threads", "1"]
        subprocess.run(["rm", "-rf", rundir])
        start = cpu_jiffies()
        run(train, env)
        cost["run_steal"] = steal_of(start)  # kept beside the prediction it is read against
        secs = [json.loads(l)["seconds"] for l in open(os.path.join(rundir, "metrics.jsonl"))]
        # A shared host's jitter only ever slows a step: the fastest steady step is the
        # machine's own speed, as calibration's best-of figures are (--estimator median:
        # the middle step instead).
        steady = secs[2:] if len(secs) > 2 else secs[-1:]
        # Under ep the work itself changes from step to step with the routing (the busiest
        # rank sets the pace), so the fastest step is the best-balanced one, not the
        # machine's speed: the median step, against a typical step's load.
        measured = min(steady) if a.estimator == "min" and ep == "1" else statistics.median(steady)
        report = json.load(open(summ))["report"]
        peaks = report.get("training_peak_bytes", {})
        if lname == "1 rank" and "moe" in report:
            loads[mname] = report["moe"].get("busiest_rank_over_even_by_ep", {})
        return measured, cost, max(peaks.values()) if peaks else 0, load

    # Each configuration's prediction comes from a calibration taken just before its run, and
    # the run counts only if the calibration taken just after it (the next one's) finds the
    # machine as fast (--drift): a shared host's speed moves over minutes, and a run paired
    # with a calibration from another moment measures the host, not the planner. A run in a
    # moment of drift is run again (--retries). --repeats passes; the fastest steady one counts.
    unsteady = 0
    for rep in range(a.repeats):
        before = fresh_cluster(any(l[3] for _, l in todo)) if not a.cluster else (a.cluster, None)
        for i, (mname, (lname, batch, layout, procs)) in enumerate(todo):
            steady = True
            for attempt in range(a.retries + 1):
                used = before
                got = measure(i, mname, lname, batch, layout, procs, used[0])
                if a.cluster:
                    break
                # the calibration after (with the processes' link if the next layout needs it)
                nxt = todo[i + 1][1][3] if i + 1 < len(todo) else 0
                before = fresh_cluster(bool(procs or nxt))
                # The prediction: the plan on the median of the calibrations around the run (the
                # one after it and the --window - 1 before it), each a noisy measurement of the
                # same machine; --window 0: on the one before it alone.
                if a.window > 0:  # (each figure's median: dt_cluster_median_json)
                    merged = os.path.join(tmp, "window%d.json" % n_cal[0])
                    run([dtrain, "plan", "--median-of"] + history[-a.window:] + ["--json", merged], env)
                    cost, _ = predict(i, mname, batch, layout, procs, merged)
                    cost["run_steal"], cost["step_s_before"] = got[1]["run_steal"], got[1]["step_s"]
                    got = (got[0], cost) + got[2:]
                d, stolen = drift(used[1], before[1]), got[1]["run_steal"]
                steady = d <= a.drift and stolen <= a.max_steal
                if steady:
                    break
                unsteady += 1
                why = ("the machine's speed moved %.0f%% during the run" % (100 * d) if d > a.drift else
                       "the hypervisor took %.0f%% of the CPU time during the run" % (100 * stolen))
                print("pass %d/%d %-12s %-26s %s: %s" % (rep + 1, a.repeats, mname, lname, why,
                                                         "again" if attempt < a.retries else "kept, marked unsteady"),
                      flush=True)
            if used[1]:
                clusters.append({"pass": rep, "model": mname, "layout": lname, "cluster": used[1],
                                 "steal": cal_steal[used[0]]})
            tries.setdefault(i, []).append(got + (steady,))
            print("pass %d/%d %-12s %-26s predicted %.4f s, measured %.4f s" % (
                rep + 1, a.repeats, mname, lname, got[1]["step_s"], got[0]), flush=True)
    print()
    print("%-12s %-26s %10s %10s %7s %10s %10s %7s" % ("model", "layout", "pred s", "meas s", "err", "pred MB",
                                                         "meas MB", "err"), flush=True)
    for i, (mname, (lname, batch, layout, procs)) in enumerate(todo):
        # the fastest steady pass (any pass if none was steady), as plan_table.py merges runs
        measured, cost, mpeak, _, steady = min(tries[i], key=lambda t: (not t[4], t[0]))
        # Under mpirun only rank 0's process reports: its rank's peak, against its stage's.
        ppeak = cost["ranks"][0]["peak_bytes"] if procs else cost["peak_bytes"]
        row = {"model": mname, "layout": lname, "flags": layout, "mpi_processes": procs,
               "predicted_step_s": cost["step_s"], "measured_step_s": measured,
               "predicted_peak_bytes": ppeak, "measured_peak_bytes": mpeak, "predicted_time": cost["time"],
               "measured_step_s_per_pass": [t[0] for t in tries[i]],
               "predicted_step_s_per_pass": [t[1]["step_s"] for t in tries[i]], "steady": steady}
        row["run_steal"] = cost.get("run_steal", 0.0)
        if "step_s_before" in cost:  # --window: the plan on the calibration before the run alone
            row["predicted_step_s_before"] = cost["step_s_before"]
        if tries[i][0][3]:
            row["plan_flags"] = tries[i][0][3]
        row["step_error"] = cost["step_s"] / measured - 1
        row["peak_error"] = ppeak / mpeak - 1 if mpeak else float("nan")
        rows.append(row)
        print("%-12s %-26s %10.4f %10.4f %+6.1f%% %10.1f %10.1f %+6.1f%%%s" % (
            mname, lname, cost["step_s"], measured, 100 * row["step_error"], ppeak / 1e6, mpeak / 1e6,
            100 * row["peak_error"], "" if steady else "  (unsteady)"), flush=True)
    summary = {"calibrations": n_cal[0], "unsteady_runs_repeated": unsteady}
    summary.update(summarize(rows))
    taus = summary["kendall_tau_per_model"]
    print("\n%d configurations: step time mean |error| %.1f%%, worst %.1f%%, %d within 10%%;" % (
        len(rows), 100 * summary["step_mean_abs_error"], 100 * summary["step_max_abs_error"],
        summary["step_within_10pct"]))
    print("peak memory mean |error| %.1f%%, worst %.1f%%, %d within 5%%;" % (
        100 * summary["peak_mean_abs_error"], 100 * summary["peak_max_abs_error"], summary["peak_within_5pct"]))
    print("Kendall tau of the step-time ranking: %s; pooled %.2f" % (
        ", ".join("%s %.2f" % kv for kv in taus.items()), summary["kendall_tau_pooled"]))
    if not a.cluster:
        print("%d calibrations, one before each run; %d runs repeated because the machine's speed moved or the "
              "hypervisor took CPU time during them, %d kept unsteady (marked in the JSON)" % (
                  n_cal[0], unsteady, summary["unsteady_kept"]))
    if a.json:
        json.dump({"clusters": clusters or [{"cluster": json.load(open(a.cluster))}], "configurations": rows,
                   "summary": summary}, open(a.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
