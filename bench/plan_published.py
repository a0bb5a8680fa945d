#!/usr/bin/env python3
"""The planner against published GPU measurements (bench/plan_published.json: Megatron-LM's
papers and READMEs, Llama 3): for each run, `dtrain plan --cluster <node>:<hosts>` predicts
the step time of the same model, layout and hardware (a process per GPU), and the predicted
per-GPU TFLOP/s is computed with the source's own FLOP count (Narayanan et al. 2021 count
the recompute's forward; Megatron's 2024 README and Llama 3 model FLOPs only) or, where the
source gives a step time (Korthikanti et al. 2022), the step time is compared directly.
Nothing runs on a GPU here: this checks the cost model's GPU side against what others
measured. Prints each row and the error statistics.

    python3 bench/plan_published.py [--dtrain build/default/dtrain] [--json out.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def flops_per_step(m, l, B, hardware_flops):
    """Narayanan et al. (2021) eq. 3 (with recompute's extra forward) or the model FLOPs
    (72 instead of 96, V / (12 l h)): per step of B sequences."""
    s, L, h, V = m["seq_len"], m["n_layer"], m["d_model"], m["vocab"]
    if m.get("act") == "swiglu":  # not Megatron's GPT shape: 6 N per token plus full attention
        return 6.0 * m["params"] * B * s + 12.0 * L * h * s * s * B
    if hardware_flops:
        return 96.0 * B * s * L * h * h * (1 + s / (6.0 * h) + V / (16.0 * L * h))
    return 72.0 * B * s * L * h * h * (1 + s / (6.0 * h) + V / (12.0 * L * h))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtrain", default="build/default/dtrain")
    ap.add_argument("--published", default=os.path.join(os.path.dirname(__file__), "plan_published.json"))
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    rows = json.load(open(a.published))["measurements"]
    tmp = tempfile.mkdtemp(prefix="plan_published_")
    out_rows = []
    print("%-46s %6s %-22s %9s %9s %7s" % ("run", "GPUs", "layout", "published", "predicted", "error"))
    for i, r in enumerate(rows):
        m, l = r["model"], r["layout"]
        mb = l.get("micro_batch") or 1
        v = l.get("virtual_stages") or 1
        dp, tp, pp = l["dp"], l["tp"], l["pp"]
        M = l["global_batch"] // (dp * mb)
        recompute = l.get("recompute") == "full"
        sp = bool(l.get("sequence_parallel")) or (l.get("sequence_parallel") is None and tp > 1)
        act = m.get("act", "gelu")
        flags = ["--layers", str(m["n_layer"]), "--d-model", str(m["d_model"]), "--heads", str(m["n_head"]),
                 "--kv-heads", str(m.get("n_kv_head") or m["n_head"]), "--d-ff", str(m.get("d_ff") or 4 * m["d_model"]),
                 "--vocab", str(m["vocab"]), "--context", str(m["seq_len"]), "--act", act,
                 "--pos", "rope" if act == "swiglu" else "learned", "--norm", "rmsnorm" if act == "swiglu" else "layernorm",
                 "--precision", "f16" if r["precision"] == "f16" else "bf16",
                 "--dp", str(dp), "--tp", str(tp), "--micro-batch", str(mb), "--micro-batches", str(M),
                 "--backend", "mpi", "--cluster", "%s:%d" % (r["hardware"], max(1, r["gpus"] // 8))]
        if pp > 1:
            flags += ["--pp", str(pp)]
            if v > 1 and M % pp == 0:
                flags += ["--pp-schedule", "interleaved", "--virtual-stages", str(v)]
        if sp and tp > 1:
            flags.append("--sp")
        if recompute:
            flags.append("--recompute")
        if l.get("zero"):
            flags += ["--zero", str(l["zero"])]
        out = os.path.join(tmp, "p%d.json" % i)
        p = subprocess.run([a.dtrain, "plan"] + flags + ["--json", out], capture_output=True, text=True)
        if p.returncode != 0:
            print("%-46s skipped: %s" % (r["name"], (p.stderr.strip().splitlines() or ["?"])[-1][:100]))
            continue
        cost = json.load(open(out))["cost"]
        step = cost["step_s"]
        layout = "tp%d pp%d dp%d%s" % (tp, pp, dp, " v%d" % v if v > 1 else "")
        if r.get("step_time_s"):
            published, predicted, unit = r["step_time_s"], step, "s/step"
        else:
            hw = "96*B" in r.get("mfu_or_hfu_note", "")  # Narayanan et al.'s eq. 3 (recompute counted)
            predicted = flops_per_step(m, l, l["global_batch"], hw) / step / r["gpus"] / 1e12
            published, unit = r["achieved_tflops_per_gpu"], "TFLOP/s"
        err = predicted / published - 1
        out_rows.append({"name": r["name"], "source": r["source"], "gpus": r["gpus"], "layout": layout, "unit": unit,
                         "published": published, "predicted": predicted, "error": err, "predicted_step_s": step,
                         "predicted_time": cost["time"]})
        print("%-46s %6d %-22s %9.2f %9.2f %+6.1f%%  (%s)" % (r["name"][:46], r["gpus"], layout, published, predicted,
                                                           100 * err, unit))
    errs = [abs(x["error"]) for x in out_rows]
    summary = {"runs": len(out_rows), "mean_abs_error": statistics.mean(errs), "median_abs_error": statistics.median(errs),
               "max_abs_error": max(errs), "within_10pct": sum(e <= 0.10 for e in errs),
               "within_20pct": sum(e <= 0.20 for e in errs)}
    print("\n%d runs: mean |error| %.1f%%, median %.1f%%, worst %.1f%%; %d within 10%%, %d within 20%%" % (
        summary["runs"], 100 * summary["mean_abs_error"], 100 * summary["median_abs_error"],
        100 * summary["max_abs_error"], summary["within_10pct"], summary["within_20pct"]))
    if a.json:
        json.dump({"rows": out_rows, "summary": summary}, open(a.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
