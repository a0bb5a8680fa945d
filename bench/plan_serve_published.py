#!/usr/bin/env python3
"""The serving planner against published GPU measurements (bench/plan_serve_published.json:
NVIDIA's NeMo Framework user guide, Llama-2 inference on H100 with TensorRT-LLM, a batch of
requests of 128 prompt and 20 generated tokens, tp 1 to 8, batch 1 to 8). For each, `dtrain
plan --serve --cluster h100-node` predicts the batch's latency as its prompts' prefill (one
chunk of batch x 128 tokens: `ttft_s` of a prompt that long) plus 19 decode steps of the
batch (`time.step_s` at 128 + 10 positions). Nothing runs on a GPU here: this checks the
serving model's GPU side against what others measured. Prints each row and the error
statistics.

    python3 bench/plan_serve_published.py [--dtrain build/default/dtrain] [--json out.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def plan(dtrain, model, tp, batch, prompt, output, path):
    flags = ["--layers", str(model["n_layer"]), "--d-model", str(model["d_model"]), "--heads", str(model["n_head"]),
             "--kv-heads", str(model["n_kv_head"]), "--d-ff", str(model["d_ff"]), "--vocab", str(model["vocab"]),
             "--context", str(model["context"]), "--act", "swiglu", "--pos", "rope", "--norm", "rmsnorm",
             "--precision", "bf16", "--serve", "--cluster", "h100-node", "--tp", str(tp), "--batch", str(batch),
             "--prompt", str(prompt), "--output", str(output), "--backend", "mpi", "--json", path]
    r = subprocess.run([dtrain, "plan"] + flags, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("dtrain plan failed: %s\n%s" % (" ".join(flags), r.stderr))
    return json.load(open(path))["serve_cost"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtrain", default="build/default/dtrain")
    ap.add_argument("--published", default=os.path.join(os.path.dirname(__file__), "plan_serve_published.json"))
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    pub = json.load(open(a.published))
    tmp = tempfile.mkdtemp(prefix="plan_serve_published_")
    path = os.path.join(tmp, "p.json")
    print("%-12s %3s %5s %11s %11s %8s   (prefill + 19 decode steps)" % ("model", "tp", "batch", "published", "predicted",
                                                                         "error"))
    out, errors = [], []
    for r in pub["measurements"]:
        m = pub["models"][r["model"]]
        P, O, b, tp = r["prompt"], r["output"], r["batch"], r["tp"]
        prefill = plan(a.dtrain, m, tp, 1, P * b, O, path)["ttft_s"]
        step = plan(a.dtrain, m, tp, b, P, O, path)["time"]["step_s"]
        predicted = 1e3 * (prefill + (O - 1) * step)
        err = predicted / r["latency_ms"] - 1
        errors.append(abs(err))
        print("%-12s %3d %5d %8.1f ms %8.1f ms %+7.1f%%   (%.1f + 19 x %.2f ms)" % (r["model"], tp, b, r["latency_ms"],
                                                                                  predicted, 100 * err, 1e3 * prefill,
                                                                                  1e3 * step))
        out.append(dict(r, predicted_ms=predicted, predicted_prefill_ms=1e3 * prefill, predicted_step_ms=1e3 * step,
                        error=err))
    summary = {"runs": len(errors), "mean_abs_error": statistics.mean(errors),
               "median_abs_error": statistics.median(errors), "worst_abs_error": max(errors),
               "within_10_percent": sum(e <= 0.10 for e in errors), "within_20_percent": sum(e <= 0.20 for e in errors)}
    print("\n%d runs: mean |error| %.1f%%, median %.1f%%, worst %.1f%%; %d within 10%%, %d within 20%%" % (
        summary["runs"], 100 * summary["mean_abs_error"], 100 * summary["median_abs_error"],
        100 * summary["worst_abs_error"], summary["within_10_percent"], summary["within_20_percent"]))
    print("source: " + pub["sources"][0]["url"])
    if a.json:
        json.dump({"runs": out, "summary": summary, "sources": pub["sources"]}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
