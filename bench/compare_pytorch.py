#!/usr/bin/env python3
"""libdtrain against PyTorch on this CPU: the same GPT trained by both, alternating in one run.

The model is gpt-small (6 layers, d_model 384, 6 heads, context 256, byte vocabulary, GELU,
LayerNorm, learned positions, tied embeddings, AdamW with global-norm clipping at 1.0);
PyTorch's copy is tests/gpu/torch_anchor.py's GPT (declared there once). The PyTorch compared
is PyTorch 2.x from PyPI, the one its users install, in a venv (--torch-venv, default
build/torch-venv; --setup-venv makes it: python3 -m venv DIR, then DIR/bin/pip install torch
numpy). When that venv has no python, the Python running this script is used if it imports
torch (Debian's python3-torch 1.13); when both exist and differ, each gets its own rows.
Three settings, each in its best thread setting on this machine:
  single f32  : one process, 2 threads, batch 4    (libdtrain: bench_model --filter train
                --threads 2 --batch 4)
  single bf16 : the same with PyTorch's torch.autocast("cpu", dtype=torch.bfloat16) around
                forward and loss, f32 master parameters, as its users train (libdtrain: the
                same with --precision bf16)
  ddp f32     : 2 processes x 1 thread, batch 4 each (libdtrain: bench_ddp --filter ddp, dp 2
                on its in-process backend; PyTorch: DistributedDataParallel over gloo)
For both single settings PyTorch runs eager and under torch.compile(model) (3 warm-up steps
instead of 2, so that compiling the forward and the backward stays out of the timing); the
faster of the two is "best PyTorch", and the ratio is libdtrain / best PyTorch. When compiling
fails (e.g. no C++ toolchain for Inductor), the row says "compile unavailable: <reason>" and
eager is the figure; --no-compile skips it, as do PyTorch versions without torch.compile.
Each round runs the settings in turn, PyTorch then libdtrain for each, so a machine that slows
down slows both sides; the figures are medians over rounds.
Environment of the PyTorch children: OMP_WAIT_POLICY per major version (OMP_WAIT_POLICY below;
one set in the environment overrides it for all). Debian's 1.13 runs with PASSIVE (its best
setting here: without it, its OpenMP threads spin and fight each other). PyPI's 2.x runs
without it, spinning as libgomp does by default (libdtrain's kernel pool spins too): on
--quick children of 2.15 with the machine otherwise idle, unset gave 58-63k tokens/s in f32
eager against 22-23k with PASSIVE, 41-45k against 17-18k in bf16 eager, 63k against 22k
compiled (probably the cost of waking an idle vCPU of this KVM guest). While another process
held a core (a compiler, tests), unset collapsed to 0.4-27k and PASSIVE gave 41-46k: run it
on a quiet machine, or set OMP_WAIT_POLICY=PASSIVE to compare on a busy one. DDP (1 thread
per process) was the same either way.
Compiled children get TORCHINDUCTOR_COMPILE_THREADS=1 (unless set): Inductor compiles in
its own process instead of leaving a pool of compile workers beside the timed steps. Both
sides get the same OPENBLAS_CORETYPE (Haswell unless set: the project's machines set it, and
Debian's PyTorch calls OpenBLAS for its linear layers; unset, PyTorch 1.13 ran 2x slower
here; PyPI's PyTorch runs them on MKL and oneDNN). Skips, with a message and exit 0, when
there is no PyTorch to run: no venv and a Python that cannot import torch.

    /usr/bin/python3 bench/compare_pytorch.py [--build build/default] [--rounds 3] [--steps 6]
                                              [--torch-venv DIR] [--setup-venv] [--no-compile]
                                              [--quick] [--json PATH]
Progress goes to stderr; the table to stdout; --json writes every figure and every run.
"""
import argparse
import contextlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FULL = dict(layers=6, d_model=384, heads=6, context=256, vocab=256, batch=4)
QUICK = dict(layers=2, d_model=64, heads=2, context=64, vocab=256, batch=4)
# (key, mode, precision, label)
SETTINGS = [("single_f32", "single", "f32", "single f32 (1 process, 2 threads)"),
            ("single_bf16", "single", "bf16", "single bf16 (1 process, 2 threads)"),
            ("ddp_f32", "ddp", "f32", "ddp f32 (2 processes x 1 thread)")]
WARMUP = {"eager": 2, "compile": 3}


def progress(msg):
    print(f"[compare_pytorch] {msg}", file=sys.stderr, flush=True)


# ---- the PyTorch side: run in a child process, so that thread settings apply from the start --
def torch_gpt(cfg):
    spec = importlib.util.spec_from_file_location("torch_anchor", os.path.join(ROOT, "tests/gpu/torch_anchor.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.GPT(cfg["vocab"], cfg["context"], cfg["layers"], cfg["d_model"], cfg["heads"])


def torch_steps(cfg, steps, rank=0, precision="f32", variant="eager"):
    """Median seconds per training step of one replica, after WARMUP[variant] warm-up steps.
    bf16: autocast around forward and loss (the linear layers, the tied head and attention run
    in bf16; parameters, gradients and AdamW stay f32). compile: torch.compile(model); its
    first forward and backward compile, inside the warm-up."""
    import torch
    import torch.nn.functional as F
    torch.manual_seed(1337)
    model = torch_gpt(cfg)
    if torch.distributed.is_initialized():
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    run = torch.compile(model) if variant == "compile" else model
    g = torch.Generator().manual_seed(7 + rank)
    ids = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["context"] + 1), generator=g)
    x, y = ids[:, :-1], ids[:, 1:]
    times = []
    for i in range(WARMUP[variant] + steps):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext():
            loss = F.cross_entropy(run(x).float().view(-1, cfg["vocab"]), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i >= WARMUP[variant]:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def ddp_worker(rank, cfg, steps, port, out):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    s = torch_steps(cfg, steps, rank)
    all_s = [None, None]
    dist.all_gather_object(all_s, s)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"step_s": max(all_s)}, f)
    dist.barrier()
    dist.destroy_process_group()
    # PyTorch 2.15's workers abort now and then in their static destructors ("terminate called
    # without an active exception", about 1 run in 10 here), after all of the above: leave
    # without running them
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def child(a):
    """--child single|ddp [--precision f32|bf16] [--variant eager|compile]: prints
    {"tokens_per_s": ..., "torch": ...} as JSON on stdout, or, when compiling fails,
    {"compile_unavailable": reason, "torch": ...}."""
    import torch
    cfg = QUICK if a.quick else FULL
    out = {"torch": torch.__version__, "variant": a.variant, "precision": a.precision,
           "threads": 2 if a.child == "single" else 1, "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}
    if a.child == "single":
        torch.set_num_threads(2)
        try:
            step_s = torch_steps(cfg, a.steps, 0, a.precision, a.variant)
        except Exception as e:  # noqa: BLE001 -- any failure of Dynamo/Inductor: report it, eager stays
            if a.variant != "compile":
                raise
            lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
            out["compile_unavailable"] = f"{type(e).__name__}: {lines[0] if lines else ''}"[:300]
            print(json.dumps(out))
            return 0
        out["tokens_per_s"] = cfg["batch"] * cfg["context"] / step_s
    else:
        import socket
        import torch.multiprocessing as mp
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            mp.spawn(ddp_worker, args=(cfg, a.steps, port, f.name), nprocs=2)
            step_s = json.load(open(f.name))["step_s"]
        out["tokens_per_s"] = 2 * cfg["batch"] * cfg["context"] / step_s
    print(json.dumps(out))
    return 0


def base_env():
    return dict(os.environ, OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "Haswell"))


# OMP_WAIT_POLICY per PyTorch major version (None: left unset), as measured (see the docstring)
OMP_WAIT_POLICY = {1: "PASSIVE", 2: None}


def omp_wait_policy(version):
    if "OMP_WAIT_POLICY" in os.environ:
        return os.environ["OMP_WAIT_POLICY"]
    return OMP_WAIT_POLICY.get(int(version.split(".")[0]))


def torch_env(side, variant):
    env = base_env()
    env.pop("OMP_WAIT_POLICY", None)
    if side["omp_wait_policy"]:
        env["OMP_WAIT_POLICY"] = side["omp_wait_policy"]
    if variant == "compile":
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    return env


def run_torch(a, side, mode, precision, variant):
    cmd = side["cmd"] + [os.path.abspath(__file__), "--child", mode, "--precision", precision,
                         "--variant", variant, "--steps", str(a.steps)]
    if a.quick:
        cmd.append("--quick")
    r = subprocess.run(cmd, env=torch_env(side, variant), capture_output=True, text=True)
    if r.returncode != 0 and mode == "ddp":  # e.g. its free port taken before gloo bound it: once more
        progress(f"PyTorch {side['torch']} ddp failed (exit status {r.returncode}): once more; its stderr ends:\n"
                 + r.stderr[-1500:])
        r = subprocess.run(cmd, env=torch_env(side, variant), capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-4000:])
        raise RuntimeError(f"PyTorch {side['torch']} ({side['python']}) {mode} {precision} {variant}: "
                           f"exit status {r.returncode}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def probe_torch(python):
    """What `python` imports as torch: {"torch": version, "file": ..., "compile": bool}, or None."""
    code = ("import json, torch; print(json.dumps({'torch': torch.__version__, 'file': torch.__file__, "
            "'compile': hasattr(torch, 'compile')}))")
    try:
        r = subprocess.run([python, "-c", code], capture_output=True, text=True, env=base_env())
    except OSError:
        return None
    if r.returncode != 0:
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def setup_venv(venv):
    """--setup-venv: python3 -m venv DIR, then DIR/bin/pip install torch numpy. False on failure."""
    progress(f"--setup-venv: {sys.executable} -m venv {venv}")
    r = subprocess.run([sys.executable, "-m", "venv", venv], stdout=sys.stderr)
    if r.returncode != 0:
        progress(f"--setup-venv: {sys.executable} -m venv failed (exit status {r.returncode}; "
                 "Debian: apt-get install python3-venv)")
        return False
    pip = os.path.join(venv, "bin", "pip")
    progress(f"--setup-venv: {pip} install torch numpy (PyPI; several GB with its CUDA libraries, minutes)")
    r = subprocess.run([pip, "install", "torch", "numpy"], stdout=sys.stderr)
    if r.returncode != 0:
        progress(f"--setup-venv: pip install failed (exit status {r.returncode})")
        return False
    progress(f"--setup-venv: done: {venv}")
    return True


def torch_sides(a):
    """The PyTorch installations to compare against, in table order: the venv's, then the one
    the running Python imports, when it is another one."""
    sides, missing = [], []
    vpy = os.path.join(a.torch_venv, "bin", "python")
    if os.access(vpy, os.X_OK):
        t = probe_torch(vpy)
        if t:
            sides.append(dict(t, python=vpy, cmd=[vpy], source="venv"))
        else:
            missing.append(f"{vpy} cannot import torch (--setup-venv installs it)")
    else:
        missing.append(f"--torch-venv {a.torch_venv} has no bin/python (--setup-venv makes it)")
    try:
        import torch
        here = {"torch": torch.__version__, "file": torch.__file__, "compile": hasattr(torch, "compile")}
    except ImportError:
        here = None
        missing.append(f"{sys.executable} cannot import torch (Debian: apt-get install python3-torch, "
                       "then run with /usr/bin/python3)")
    if here and not any(os.path.realpath(s["file"]) == os.path.realpath(here["file"]) for s in sides):
        cmd = [sys.executable] + (["-I"] if sys.flags.isolated else [])
        sides.append(dict(here, python=sys.executable, cmd=cmd, source="running python"))
    for s in sides:
        s["omp_wait_policy"] = omp_wait_policy(s["torch"])
    return sides, missing


# ---- the libdtrain side: its own benchmarks, read back through --json ---------------------------
def run_dtrain(a, mode, precision):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        if mode == "single":
            exe, extra = "bench_model", ["--filter", "train", "--threads", "2", "--batch", "4", "--precision", precision]
        else:
            exe, extra = "bench_ddp", ["--filter", "ddp", "--batch", "4"]
        cmd = [os.path.join(a.build, "bench", exe), "--steps", str(a.steps), "--json", f.name] + extra
        if a.quick:
            cmd.insert(1, "--quick")
        subprocess.run(cmd, capture_output=True, text=True, check=True, env=base_env())
        rep = json.load(open(f.name))
    want = ("train", "step") if mode == "single" else ("ddp", "dp2")
    for r in rep.get("results", []):
        if (r.get("section"), r.get("name")) == want:
            return {"tokens_per_s": r["tokens_per_s"]}
    raise RuntimeError(f"{exe}: no {want} record in its JSON")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build/default"), help="libdtrain build directory")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=6, help="timed steps per measurement (after 2 warm-up, 3 compiled)")
    p.add_argument("--quick", action="store_true", help="2 layers, d_model 64, context 64 (a smoke test)")
    p.add_argument("--json", help="write every figure here")
    p.add_argument("--torch-venv", metavar="DIR", default=os.path.join(ROOT, "build/torch-venv"),
                   help="venv whose bin/python runs PyTorch (default: build/torch-venv under the repository)")
    p.add_argument("--setup-venv", action="store_true",
                   help="make --torch-venv first: python3 -m venv DIR; DIR/bin/pip install torch numpy")
    p.add_argument("--no-compile", action="store_true", help="PyTorch eager only (no torch.compile variant)")
    p.add_argument("--child", choices=["single", "ddp"], help=argparse.SUPPRESS)
    p.add_argument("--precision", choices=["f32", "bf16"], default="f32", help=argparse.SUPPRESS)
    p.add_argument("--variant", choices=["eager", "compile"], default="eager", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.rounds < 1 or a.steps < 1:
        p.error("--rounds and --steps: accepted values are integers >= 1")
    if a.child:
        return child(a)
    a.torch_venv = os.path.abspath(a.torch_venv)
    if os.path.exists(a.torch_venv) and not os.path.isdir(a.torch_venv):
        p.error(f"--torch-venv {a.torch_venv}: not a directory; accepted values: a venv directory, "
                "or a path where --setup-venv makes one")
    if a.setup_venv and not setup_venv(a.torch_venv):
        return 1
    sides, missing = torch_sides(a)
    if not sides:
        print(f"compare_pytorch: skipped: no PyTorch: {'; '.join(missing)}")
        return 0
    if not any(s["source"] == "venv" for s in sides):
        progress(f"no PyTorch in --torch-venv: {missing[0]}; comparing with {sys.executable}'s torch alone")
    for exe in ("bench_model", "bench_ddp"):
        if not os.access(os.path.join(a.build, "bench", exe), os.X_OK):
            p.error(f"--build {a.build}: no bench/{exe} there (build with DTRAIN_BUILD_BENCH=ON)")
    for i, s in enumerate(sides):
        s["label"] = f"PyTorch {s['torch']}"
        progress(f"{s['label']}: {s['python']} ({s['source']}), OMP_WAIT_POLICY={s['omp_wait_policy'] or 'unset'}")
        s["compile_unavailable"] = {}
        if a.no_compile:
            s["compile_unavailable"] = {prec: "--no-compile" for prec in ("f32", "bf16")}
        elif not s["compile"]:
            s["compile_unavailable"] = {prec: f"torch {s['torch']} has no torch.compile" for prec in ("f32", "bf16")}
    # runs[key]["dtrain"] = [tok/s per round]; runs[key][i][variant] = [tok/s per round] of sides[i]
    runs = {key: {"dtrain": [], **{i: {"eager": [], "compile": []} for i in range(len(sides))}}
            for key, *_ in SETTINGS}
    for r in range(a.rounds):
        for key, mode, precision, _ in SETTINGS:
            for i, s in enumerate(sides):
                variants = ["eager"]
                if mode == "single" and precision not in s["compile_unavailable"]:
                    variants.append("compile")
                for v in variants:
                    progress(f"round {r + 1}/{a.rounds}: {key}: {s['label']} {v}")
                    t = run_torch(a, s, mode, precision, v)
                    if "compile_unavailable" in t:
                        s["compile_unavailable"][precision] = t["compile_unavailable"]
                        progress(f"{s['label']} {key}: compile unavailable: {t['compile_unavailable']}")
                    else:
                        runs[key][i][v].append(t["tokens_per_s"])
            progress(f"round {r + 1}/{a.rounds}: {key}: libdtrain")
            runs[key]["dtrain"].append(run_dtrain(a, mode, precision)["tokens_per_s"])
    cfg = QUICK if a.quick else FULL
    print(f"compare_pytorch: GPT {cfg['layers']} layers, d_model {cfg['d_model']}, context {cfg['context']}, "
          f"batch {cfg['batch']} per replica, AdamW with f32 masters; medians of {a.rounds} rounds; "
          f"OPENBLAS_CORETYPE={base_env()['OPENBLAS_CORETYPE']}")
    for s in sides:
        print(f"  {s['label']}: {s['python']} ({s['source']}), OMP_WAIT_POLICY={s['omp_wait_policy'] or 'unset'}")
    print(f"{'setting':<36} {'PyTorch':<14} {'PyTorch tok/s':>13} {'libdtrain tok/s':>15} {'ratio':>6}  PyTorch variants (tok/s)")
    report = {"torch": sides[0]["torch"], "torch_venv": a.torch_venv,
              "pytorch": [{k: s[k] for k in ("label", "torch", "python", "source", "file", "omp_wait_policy")}
                          for s in sides],
              "openblas_coretype": base_env()["OPENBLAS_CORETYPE"], "config": cfg, "rounds": a.rounds,
              "steps": a.steps, "warmup_steps": WARMUP, "no_compile": a.no_compile, "settings": {}}
    for key, mode, precision, label in SETTINGS:
        d = statistics.median(runs[key]["dtrain"])
        rep = report["settings"][key] = {"mode": mode, "precision": precision, "dtrain_tokens_per_s": d,
                                         "dtrain_runs": runs[key]["dtrain"], "pytorch": []}
        for i, s in enumerate(sides):
            med = {v: statistics.median(x) for v, x in runs[key][i].items() if x}
            best = max(med, key=med.get)
            t = med[best]
            why = None
            if mode == "single":
                why = s["compile_unavailable"].get(precision)
                parts = [f"eager {med['eager']:.0f}"]
                if "compile" in med:
                    parts.append(f"compiled {med['compile']:.0f}")
                elif why != "--no-compile":  # the whole reason is in --json and in the progress lines
                    parts.append(f"compile unavailable: {why if len(why) <= 60 else why[:57] + '...'}")
                variants = ", ".join(parts) + f"; best: {'compiled' if best == 'compile' else 'eager'}"
            else:
                variants = "eager (DDP, gloo)"
            print(f"{label:<36} {s['torch']:<14} {t:>13.0f} {d:>15.0f} {d / t:>6.2f}  {variants}")
            rep["pytorch"].append({"torch": s["torch"], "python": s["python"], "source": s["source"],
                                   "best": best, "tokens_per_s": t, "ratio": d / t,
                                   "eager_tokens_per_s": med.get("eager"), "compile_tokens_per_s": med.get("compile"),
                                   "compile_unavailable": why,
                                   "eager_runs": runs[key][i]["eager"], "compile_runs": runs[key][i]["compile"]})
        # the first PyTorch (the venv's, when there is one) also at the setting's top level
        top = rep["pytorch"][0]
        rep.update(torch_tokens_per_s=top["tokens_per_s"], ratio=top["ratio"], torch_best=top["best"],
                   torch_runs=runs[key][0][top["best"]])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
