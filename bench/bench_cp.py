#!/usr/bin/env python3
"""Context parallelism: peak activation memory per rank and step time at cp 1, 2, 4.

Each cp is a `dtrain train --cp N --report` run of the same tiny model on the same text at a
long context (default 4096 tokens); cp 1 in the same run is the anchor. Printed per cp: the
training tokens/s and its ratio to cp 1, each rank's activation peak from the library's
ledger and its ratio to cp 1 (ring attention keeps 1/cp of a sequence's activations on a
rank), and the ring bytes per step measured against the formula. The cp ranks are threads
of one process sharing this machine's cores, so the step-time ratio shows ring attention's
overhead, not a speedup. Runs alternate over --repeats rounds; the best tokens/s counts.

    /usr/bin/python3 bench/bench_cp.py [--dtrain build/default/dtrain] [--context 4096] [--json out.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def corpus(path):
    """Some text to train on: the repository's docs, at least 64 KiB of it."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    parts = [os.path.join(root, "README.md")] + sorted(
        os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    with open(path, "wb") as out:
        for p in parts:
            with open(p, "rb") as f:
                out.write(f.read())
    return path


def run(args, cp, data, work):
    js = os.path.join(work, "cp%d.json" % cp)
    cmd = [args.dtrain, "train", "--data", "text:" + data, "--context", str(args.context), "--layers",
           str(args.layers), "--d-model", str(args.d_model), "--heads", str(args.heads), "--batch", str(args.batch),
           "--steps", str(args.steps), "--cp", str(cp), "--report", "--no-progress", "--eval-problems", "0",
           "--out", os.path.join(work, "run%d" % cp), "--json", js]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("bench_cp: %s failed:\n%s" % (" ".join(cmd), r.stdout))
    with open(js) as f:
        j = json.load(f)
    rep = j["report"]
    if cp == 1:
        peak = rep["per_rank"][0]["activation"]["peak"]
        ring = (0.0, 0.0)
    else:
        peak = max(p["activation_peak"] for p in rep["cp"]["per_rank"])
        ring = (rep["cp"]["ring_bytes_per_step_measured"], rep["cp"]["ring_bytes_per_step_formula"])
    return {"tokens_per_s": j["tokens_per_s"], "final_loss": j["final_loss"], "activation_peak": peak,
            "ring_bytes_per_step": ring[0], "ring_bytes_per_step_formula": ring[1]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtrain", default="build/default/dtrain")
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--cps", default="1,2,4")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    cps = [int(c) for c in args.cps.split(",")]
    if cps[0] != 1:
        sys.exit("bench_cp: --cps must start with 1 (the anchor)")
    os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")
    results = {}
    with tempfile.TemporaryDirectory() as work:
        data = corpus(os.path.join(work, "corpus.txt"))
        for rnd in range(args.repeats):
            for cp in cps:
                print("round %d/%d: cp %d ..." % (rnd + 1, args.repeats, cp), flush=True)
                r = run(args, cp, data, work)
                best = results.get(cp)
                if best is None or r["tokens_per_s"] > best["tokens_per_s"]:
                    results[cp] = r
    base = results[1]
    print("\ncontext %d, %d layers of d_model %d, batch %d: cp ranks are threads of one process on %d cores"
          % (args.context, args.layers, args.d_model, args.batch, os.cpu_count()))
    print("%4s %12s %10s %18s %10s %16s %10s" % ("cp", "tokens/s", "vs cp 1", "activation peak", "vs cp 1",
                                                 "ring B/step", "/formula"))
    rows = []
    for cp in cps:
        r = results[cp]
        ring_ratio = r["ring_bytes_per_step"] / r["ring_bytes_per_step_formula"] if cp > 1 else 0.0
        print("%4d %12.0f %10.3f %15.3f MB %10.3f %16.0f %10s" % (
            cp, r["tokens_per_s"], r["tokens_per_s"] / base["tokens_per_s"], r["activation_peak"] / 1e6,
            r["activation_peak"] / base["activation_peak"], r["ring_bytes_per_step"],
            "%.3f" % ring_ratio if cp > 1 else "-"))
        rows.append(dict(r, cp=cp, tokens_per_s_vs_cp1=r["tokens_per_s"] / base["tokens_per_s"],
                         activation_peak_vs_cp1=r["activation_peak"] / base["activation_peak"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"context": args.context, "layers": args.layers, "d_model": args.d_model, "batch": args.batch,
                       "results": rows}, f, indent=2)
        print("wrote " + args.json)


if __name__ == "__main__":
    main()
