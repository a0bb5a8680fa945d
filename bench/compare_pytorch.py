#!/usr/bin/env python3
"""libdtrain against PyTorch on this CPU: the same GPT trained by both, alternating in one run.

The model is gpt-small (6 layers, d_model 384, 6 heads, context 256, byte vocabulary, GELU,
LayerNorm, learned positions, tied embeddings, f32, AdamW with global-norm clipping at 1.0);
PyTorch's copy is tests/gpu/torch_anchor.py's GPT (declared there once). Two settings, each
in its best thread setting on this machine:
  single : one process, 2 threads, batch 4       (libdtrain: bench_model --filter train)
  ddp    : 2 processes x 1 thread, batch 4 each  (libdtrain: bench_ddp --filter ddp, dp 2 on
           its in-process backend; PyTorch: DistributedDataParallel over gloo)
Each round runs the four in turn (torch single, dtrain single, torch ddp, dtrain ddp), so a
machine that slows down slows both sides; the figures are medians over rounds.
PyTorch runs with OMP_WAIT_POLICY=PASSIVE (its best setting here: without it, its OpenMP
threads spin and fight each other). Both sides get the same OPENBLAS_CORETYPE (Haswell
unless set: the project's machines set it, and Debian's PyTorch calls OpenBLAS for its
linear layers; unset, PyTorch ran 2x slower here). Skips, with a message and exit 0, when the Python that
runs it cannot import torch (Debian: apt-get install python3-torch, then run it with
/usr/bin/python3).

    /usr/bin/python3 bench/compare_pytorch.py [--build build/default] [--rounds 3] [--steps 6]
                                              [--quick] [--json PATH]
Progress goes to stderr; the table to stdout; --json writes every figure.
"""
import argparse
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


def progress(msg):
    print(f"[compare_pytorch] {msg}", file=sys.stderr, flush=True)


# ---- the PyTorch side: run in a child process, so that thread settings apply from the start --
def torch_gpt(cfg):
    spec = importlib.util.spec_from_file_location("torch_anchor", os.path.join(ROOT, "tests/gpu/torch_anchor.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.GPT(cfg["vocab"], cfg["context"], cfg["layers"], cfg["d_model"], cfg["heads"])


def torch_steps(cfg, steps, rank=0):
    """Median seconds per training step (after 2 warm-up steps) of one replica."""
    import torch
    import torch.nn.functional as F
    torch.manual_seed(1337)
    model = torch_gpt(cfg)
    if torch.distributed.is_initialized():
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    g = torch.Generator().manual_seed(7 + rank)
    ids = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["context"] + 1), generator=g)
    x, y = ids[:, :-1], ids[:, 1:]
    times = []
    for i in range(2 + steps):
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x).view(-1, cfg["vocab"]), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i >= 2:
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
    dist.destroy_process_group()


def child(a):
    """--child single|ddp: prints {"tokens_per_s": ...} as JSON on stdout."""
    import torch
    cfg = QUICK if a.quick else FULL
    if a.child == "single":
        torch.set_num_threads(2)
        tok = cfg["batch"] * cfg["context"] / torch_steps(cfg, a.steps)
    else:
        import socket
        import torch.multiprocessing as mp
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            mp.spawn(ddp_worker, args=(cfg, a.steps, port, f.name), nprocs=2)
            step_s = json.load(open(f.name))["step_s"]
        tok = 2 * cfg["batch"] * cfg["context"] / step_s
    print(json.dumps({"tokens_per_s": tok, "torch": torch.__version__}))
    return 0


def base_env():
    return dict(os.environ, OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "Haswell"))


def run_torch(a, setting):
    env = dict(base_env(), OMP_WAIT_POLICY="PASSIVE")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", setting, "--steps", str(a.steps)]
    if a.quick:
        cmd.append("--quick")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


# ---- the libdtrain side: its own benchmarks, read back through --json ---------------------------
def run_dtrain(a, setting):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        if setting == "single":
            exe, extra = "bench_model", ["--filter", "train", "--threads", "2", "--batch", "4"]
        else:
            exe, extra = "bench_ddp", ["--filter", "ddp", "--batch", "4"]
        cmd = [os.path.join(a.build, "bench", exe), "--steps", str(a.steps), "--json", f.name] + extra
        if a.quick:
            cmd.insert(1, "--quick")
        subprocess.run(cmd, capture_output=True, text=True, check=True, env=base_env())
        rep = json.load(open(f.name))
    want = ("train", "step") if setting == "single" else ("ddp", "dp2")
    for r in rep.get("results", []):
        if (r.get("section"), r.get("name")) == want:
            return {"tokens_per_s": r["tokens_per_s"]}
    raise RuntimeError(f"{exe}: no {want} record in its JSON")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build/default"), help="libdtrain build directory")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=6, help="timed steps per measurement (after 2 warm-up)")
    p.add_argument("--quick", action="store_true", help="2 layers, d_model 64, context 64 (a smoke test)")
    p.add_argument("--json", help="write every figure here")
    p.add_argument("--child", choices=["single", "ddp"], help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.rounds < 1 or a.steps < 1:
        p.error("--rounds and --steps: accepted values are integers >= 1")
    try:
        import torch  # noqa: F401
    except ImportError:
        print(f"compare_pytorch: skipped: {sys.executable} cannot import torch "
              "(Debian: apt-get install python3-torch, then run with /usr/bin/python3)")
        return 0
    if a.child:
        return child(a)
    for exe in ("bench_model", "bench_ddp"):
        if not os.access(os.path.join(a.build, "bench", exe), os.X_OK):
            p.error(f"--build {a.build}: no bench/{exe} there (build with DTRAIN_BUILD_BENCH=ON)")
    runs = {(side, s): [] for side in ("torch", "dtrain") for s in ("single", "ddp")}
    version = ""
    for r in range(a.rounds):
        for setting in ("single", "ddp"):
            progress(f"round {r + 1}/{a.rounds}: {setting}: pytorch")
            t = run_torch(a, setting)
            version = t["torch"]
            runs[("torch", setting)].append(t["tokens_per_s"])
            progress(f"round {r + 1}/{a.rounds}: {setting}: libdtrain")
            runs[("dtrain", setting)].append(run_dtrain(a, setting)["tokens_per_s"])
    cfg = QUICK if a.quick else FULL
    print(f"compare_pytorch: GPT {cfg['layers']} layers, d_model {cfg['d_model']}, context {cfg['context']}, "
          f"batch {cfg['batch']} per replica, f32 AdamW; PyTorch {version}; medians of {a.rounds} rounds; "
          f"OPENBLAS_CORETYPE={base_env()['OPENBLAS_CORETYPE']}")
    print(f"{'setting':<34} {'PyTorch tok/s':>14} {'libdtrain tok/s':>16} {'ratio':>7}")
    report = {"torch": version, "openblas_coretype": base_env()["OPENBLAS_CORETYPE"], "config": cfg, "rounds": a.rounds, "steps": a.steps, "settings": {}}
    names = {"single": "1 process, 2 threads", "ddp": "DDP x 2 (1 thread each)"}
    for setting in ("single", "ddp"):
        t, d = statistics.median(runs[("torch", setting)]), statistics.median(runs[("dtrain", setting)])
        print(f"{names[setting]:<34} {t:>14.0f} {d:>16.0f} {d / t:>7.2f}")
        report["settings"][setting] = {"torch_tokens_per_s": t, "dtrain_tokens_per_s": d, "ratio": d / t,
                                       "torch_runs": runs[("torch", setting)], "dtrain_runs": runs[("dtrain", setting)]}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
