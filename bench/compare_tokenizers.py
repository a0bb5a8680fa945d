#!/usr/bin/env python3
"""libdtrain's tokenizer.json tokenizers against the `tokenizers` package, one thread each.

Both encode the same 1 MB of generated text (tools/hf_fixtures/make_tokenizers.py's generator,
the text of tests/unit/io_hf_tokenizer_test.cc) as one string, with each fixture family of
tests/fixtures/hf/tokenizers, without special tokens. The package runs here with
RAYON_NUM_THREADS=1 (set before it is imported), one `encode` call at a time; libdtrain runs
bench_tokenizer. Rounds alternate the two so that a shared machine's load falls on both; each
figure is a median. Prints MB/s of each and the ratio libdtrain / tokenizers per family, and
checks the two give the same number of tokens (tests/unit/io_hf_tokenizer_test.cc checks the ids).

    /tmp/hfvenv/bin/python bench/compare_tokenizers.py [--build build/default] [--rounds 3]
                                                       [--quick] [--json PATH]
"""
import os

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIX = os.path.join(ROOT, "tests", "fixtures", "hf", "tokenizers")
FAMILIES = ["gpt2", "llama3", "qwen2", "llama2", "mistral"]


def generator():
    spec = importlib.util.spec_from_file_location("make_tokenizers", os.path.join(ROOT, "tools", "hf_fixtures",
                                                                                  "make_tokenizers.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def hf_round(toks, text, reps):
    out = {}
    for name, tok in toks.items():
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            tok.encode(text, add_special_tokens=False)
            times.append(time.perf_counter() - t0)
        out[name] = statistics.median(times)
    return out


def dtrain_round(exe, quick):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "b.json")
        cmd = [exe, "--json", path] + (["--quick"] if quick else [])
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(path) as f:
            rep = json.load(f)
    return {r["name"]: (r["encode_median_s"], int(r["tokens"])) for r in rep["results"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "default"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    try:
        import tokenizers
    except ImportError:
        print("compare_tokenizers: the tokenizers package is not importable here; skipped")
        return 0
    exe = os.path.join(a.build, "bench", "bench_tokenizer")
    if not os.path.exists(exe):
        print(f"compare_tokenizers: {exe} is missing: build the bench_tokenizer target first", file=sys.stderr)
        return 1
    gen = generator()
    cats = gen.load_fragments()
    chunks = gen.big_chunks(cats)
    if a.quick:
        chunks = chunks[:8]
    text = "".join(chunks)
    mb = len(text.encode("utf-8")) / 1e6
    toks = {f: tokenizers.Tokenizer.from_file(os.path.join(FIX, f, "tokenizer.json")) for f in FAMILIES}
    for t in toks.values():  # warm-up (and the BPE caches, as bench_tokenizer's warm-up run fills ours)
        t.encode(text, add_special_tokens=False)
    hf, dt, dt_tokens = {f: [] for f in FAMILIES}, {f: [] for f in FAMILIES}, {}
    for r in range(a.rounds):
        print(f"[compare_tokenizers] round {r + 1}/{a.rounds}", file=sys.stderr, flush=True)
        for f, s in hf_round(toks, text, 2 if a.quick else 5).items():
            hf[f].append(s)
        for f, (s, n) in dtrain_round(exe, a.quick).items():
            dt[f].append(s)
            dt_tokens[f] = n
    print(f"tokenizers {tokenizers.__version__}, one thread; {mb:.2f} MB of generated text per encode; "
          f"load {open('/proc/loadavg').read().split()[:3]}")
    print(f"{'family':8} {'tokens':>8} {'libdtrain MB/s':>15} {'tokenizers MB/s':>16} {'ratio':>7}")
    rows = []
    for f in FAMILIES:
        d, h = statistics.median(dt[f]), statistics.median(hf[f])
        n = len(toks[f].encode(text, add_special_tokens=False).ids)
        rows.append({"family": f, "tokens": n, "libdtrain_s": d, "tokenizers_s": h, "libdtrain_mb_s": mb / d,
                     "tokenizers_mb_s": mb / h, "ratio": h / d})
        print(f"{f:8} {n:8d} {mb / d:15.2f} {mb / h:16.2f} {h / d:7.2f}"
              + ("" if dt_tokens[f] == n else f"  TOKEN COUNTS DIFFER: libdtrain {dt_tokens[f]}"))
    if a.json:
        with open(a.json, "w") as fo:
            json.dump({"text_mb": mb, "tokenizers_version": tokenizers.__version__, "rounds": a.rounds,
                       "families": rows}, fo, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
