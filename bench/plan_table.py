#!/usr/bin/env python3
"""The validation table of docs/planner.md from bench_plan.py's JSON: one Markdown row per
configuration (predicted against measured step time and peak memory per rank) and the summary
line, so the docs' figures are the bench's, not retyped.

Given several JSON files (runs at different times), each configuration keeps its fastest
steady run, with that run's own prediction: the rule bench_plan.py --repeats applies to its
passes (a shared host's slow episode can last a whole run, and rarely two).

    python3 bench/plan_table.py out.json [more.json ...] [--command "python3 bench/bench_plan.py ..."]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_plan import summarize  # noqa: E402


def merged(files):
    best = {}
    for f in files:
        for r in json.load(open(f))["configurations"]:
            key = (r["model"], r["layout"])
            old = best.get(key)
            rank = (not r.get("steady", True), r["measured_step_s"])  # steady first, then fastest
            if old is None or rank < (not old.get("steady", True), old["measured_step_s"]):
                best[key] = r
    return list(best.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+")
    ap.add_argument("--command", default="python3 bench/bench_plan.py --json out.json")
    a = ap.parse_args()
    rows = merged(a.json)
    print("| model | layout | predicted s | measured s | error | predicted MB | ledger MB | error |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %.4f | %.4f | %+.1f%% | %.1f | %.1f | %+.1f%% |" % (
            r["model"], r["layout"] + ("" if r.get("steady", True) else " (unsteady)"), r["predicted_step_s"],
            r["measured_step_s"], 100 * r["step_error"], r["predicted_peak_bytes"] / 1e6,
            r["measured_peak_bytes"] / 1e6, 100 * r["peak_error"]))
    s = summarize(rows)
    taus = ", ".join("%s %.2f" % kv for kv in s["kendall_tau_per_model"].items())
    print()
    print("%d configurations: **peak memory** mean |error| %.1f%%, worst %.1f%%, %d within 5%%; **step time** "
          "mean |error| %.1f%%, worst %.1f%%, %d within 10%%; **Kendall tau** of the ranking by step time %s per "
          "model, %.2f pooled (`%s`)." % (
              s["configurations"], 100 * s["peak_mean_abs_error"], 100 * s["peak_max_abs_error"], s["peak_within_5pct"],
              100 * s["step_mean_abs_error"], 100 * s["step_max_abs_error"], s["step_within_10pct"], taus,
              s["kendall_tau_pooled"], a.command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
