#!/usr/bin/env python3
"""libdtrain against llama.cpp on this CPU: prefill and decoding of the same Llama, alternating in one run.

The model is a Llama of 134.1M parameters (12 layers, d_model 768, 12 heads, d_ff 2048, vocab
32000, SwiGLU, RMSNorm, RoPE, untied embeddings, context 2048) with random weights, made by
libdtrain itself: a config.json written here, `dtrain export --model shape --random-init
--precision f32`, then `dtrain export --precision bf16` of that directory (the same weights,
rounded). Its tokenizer is the repository's small Llama fixture (tests/fixtures/hf/models/llama:
byte-fallback BPE, 512 tokens), its vocabulary padded with <extra_N> tokens to the model's 32000
(llama.cpp wants one token per embedding row; libdtrain takes either). Both directories go to
GGUF through llama.cpp's own convert_hf_to_gguf.py (--outtype f32, --outtype bf16), run by the
Python of --convert-venv (default build/llama-venv): it needs torch and numpy (those of
--torch-python, seen through a .pth file) plus transformers and sentencepiece from PyPI, pinned
as llama.cpp's requirements/ pin them; --setup-convert-venv (or --build-llama) makes it.
llama.cpp is, in this order: --llama-dir DIR or $LLAMA_CPP_DIR (a build directory holding
bin/llama-bench, or a source tree, built then into build/llama.cpp); with --build-llama,
PyPI's llama-cpp-python sdist (`pip download --no-binary :all: --no-deps llama-cpp-python`
into build/llama-src) and its vendor/llama.cpp, configured with `cmake -DGGML_NATIVE=ON
-DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release` (plus LLAMA_BUILD_COMMIT from the sdist's
CHANGELOG, and tests, examples, server and OpenSSL off) into build/llama.cpp, only its
llama-bench target built, `nice -n 19`, 2 jobs; else build/llama.cpp from an earlier
--build-llama. Skips, with one line and exit 0, when there is none, when it fails to build,
or when no GGUF can be made (each precision whose conversion or llama-bench fails gets
"skipped: <why>" in its rows instead).
Measured, batch 1 and 2 threads on both sides, each round f32 then bf16, llama.cpp then
libdtrain for each, figures the medians over rounds:
  llama.cpp : llama-bench -m MODEL.gguf -t 2 -p 128 -n 64 -o json: its mean tokens/s over its
              5 repetitions (after its warm-up run) of pp128 (prefill) and tg64 (decode, from
              an empty cache)
  libdtrain : dtrain generate --model DIR --precision f32|bf16 --prompt P --max-new-tokens 64
              --ignore-eos --json: prefill = prompt tokens / time to first token, decode =
              1 / inter-token latency (positions 128 to 191). A fresh process each round, so
              its prefill is the model's first forward (oneDNN's primitives created in it), and
              its time to first token holds the logits of all 128 positions and the first
              sample, where llama-bench's pp computes the last position's logits only. The
              prompt is 126 letters from "zxjvwkyq" (no merges between them in that tokenizer:
              one token each) after "▁" and <s>: 128 tokens, checked against dtrain's JSON.
              dtrain has no thread flag: its kernel pool takes every hardware thread (2 on the
              project's machines; another count is printed), OMP_NUM_THREADS=2 for oneDNN.
Decode is also set against a memory-bandwidth bound: weight bytes (parameters x 4 or 2) over
the rate of numpy's memcpy of a 1 GiB buffer on one thread, counting read + write bytes as
bench_hf does (its 2-thread memcpy); it is a copy's rate, not a read-only stream's, so a side
can pass it. Both sides get OPENBLAS_CORETYPE (Haswell unless set), as compare_pytorch.py.

    python3 bench/compare_llamacpp.py [--build build/default] [--rounds 3] [--json PATH]
                                      [--llama-dir DIR | --build-llama] [--setup-convert-venv]
                                      [--torch-python PY] [--convert-venv DIR] [--work DIR]
Progress goes to stderr; the table to stdout; --json writes every figure and every run.
"""
import argparse
import glob
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODEL = dict(layers=12, d_model=768, heads=12, d_ff=2048, vocab=32000, context=2048)
PROMPT_TOKENS, NEW_TOKENS, THREADS = 128, 64, 2
# 126 letters with no BPE merge between any two of them in the fixture tokenizer: one token
# each, after <s> and the normalizer's leading "▁"
PROMPT = "".join(random.Random(0).choice("zxjvwkyq") for _ in range(PROMPT_TOKENS - 2))
TOKENIZER_FIXTURE = os.path.join(ROOT, "tests/fixtures/hf/models/llama")
LLAMA_SRC = os.path.join(ROOT, "build/llama-src")  # the downloaded sdist, unpacked
LLAMA_BUILD = os.path.join(ROOT, "build/llama.cpp")  # what --build-llama (or a source tree) builds
JOBS = 2
PRECISIONS = ("f32", "bf16")
BYTES = {"f32": 4, "bf16": 2}


def progress(msg):
    print(f"[compare_llamacpp] {msg}", file=sys.stderr, flush=True)


def base_env():
    return dict(os.environ, OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "Haswell"))


def niced(cmd):
    return (["nice", "-n", "19"] if shutil.which("nice") else []) + cmd


def is_exe(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def tail(path, n=12):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def last_error(path):
    """The log's last line that reads like an error (else its last line), for a skip reason."""
    lines = [ln.strip() for ln in tail(path, 60).splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.search(r"error|exception|fatal|failed|not found", ln, re.I):
            return ln[:300]
    return lines[-1][:300] if lines else "(no output)"


def run_logged(cmd, log, **kw):
    """Runs cmd with stdout and stderr into `log`; its exit status (127: cannot start)."""
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        try:
            return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, **kw).returncode
        except OSError as e:
            f.write(f"{e}\n")
            return 127


# ---- llama.cpp: found, or downloaded from PyPI and built -------------------------------------
class Skip(Exception):
    """This part cannot run here; the message says why."""


def cmake_cache(build_dir):
    out = {}
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt"), errors="replace") as f:
            for ln in f:
                m = re.match(r"([A-Za-z0-9_.\-]+):[A-Z]+=(.*)$", ln.rstrip("\n"))
                if m:
                    out[m.group(1)] = m.group(2)
    except OSError:
        pass
    return out


def is_llama_source(d):
    return os.path.isfile(os.path.join(d, "CMakeLists.txt")) and os.path.isfile(os.path.join(d, "convert_hf_to_gguf.py"))


def sdist_info(src):
    """When `src` is the vendor/llama.cpp of an unpacked llama-cpp-python sdist: its version
    and the llama.cpp commit its CHANGELOG names for that version."""
    top = os.path.dirname(os.path.dirname(os.path.abspath(src)))
    info = {}
    try:
        with open(os.path.join(top, "PKG-INFO"), errors="replace") as f:
            for ln in f:
                if ln.startswith("Version:"):
                    info["llama_cpp_python"] = ln.split(":", 1)[1].strip()
                    break
    except OSError:
        return info
    try:
        with open(os.path.join(top, "CHANGELOG.md"), errors="replace") as f:
            text = f.read()
    except OSError:
        return info
    ver = info.get("llama_cpp_python")
    # the section of that version: from its header to the next one
    m = re.search(r"^## \[" + re.escape(ver or "") + r"\](.*?)(?=^## \[|\Z)", text, re.M | re.S) if ver else None
    c = re.search(r"llama\.cpp@([0-9a-f]{7,40})", m.group(1) if m else text)
    if c:
        info["commit"] = c.group(1)
        info["commit_source"] = f"llama-cpp-python {ver} CHANGELOG.md" if m else "llama-cpp-python CHANGELOG.md (latest)"
    return info


def pip_python(a):
    """A Python whose `-m pip` runs (for pip download)."""
    for py in [a.torch_python, sys.executable, os.path.join(a.convert_venv, "bin", "python")]:
        if py and is_exe(py) and subprocess.run([py, "-m", "pip", "--version"], capture_output=True).returncode == 0:
            return py
    return None


def version_key(path):
    m = re.search(r"llama_cpp_python-([0-9][0-9.]*)", os.path.basename(path))
    return [int(x) for x in m.group(1).strip(".").split(".")] if m else []


def download_llama(a):
    """--build-llama: build/llama-src/llama_cpp_python-*/vendor/llama.cpp, from PyPI if not there."""
    trees = sorted((d for d in glob.glob(os.path.join(LLAMA_SRC, "llama_cpp_python-*")) if os.path.isdir(d)),
                   key=version_key)
    trees = [d for d in trees if is_llama_source(os.path.join(d, "vendor", "llama.cpp"))]
    if not trees:
        tarballs = sorted(glob.glob(os.path.join(LLAMA_SRC, "llama_cpp_python-*.tar.gz")), key=version_key)
        if not tarballs:
            py = pip_python(a)
            if not py:
                raise Skip("--build-llama: no Python with pip to download llama-cpp-python's sdist "
                           "(pass --torch-python PY, or apt-get install python3-pip)")
            os.makedirs(LLAMA_SRC, exist_ok=True)
            cmd = [py, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "llama-cpp-python", "-d", LLAMA_SRC]
            progress(f"--build-llama: {' '.join(cmd)} (PyPI, about 80 MB)")
            log = os.path.join(LLAMA_SRC, "pip-download.log")
            if run_logged(cmd, log) != 0:
                raise Skip(f"pip download llama-cpp-python failed: {last_error(log)} (log: {log})")
            tarballs = sorted(glob.glob(os.path.join(LLAMA_SRC, "llama_cpp_python-*.tar.gz")), key=version_key)
            if not tarballs:
                raise Skip(f"pip download llama-cpp-python left no llama_cpp_python-*.tar.gz in {LLAMA_SRC}")
        progress(f"--build-llama: unpacking {tarballs[-1]}")
        with tarfile.open(tarballs[-1]) as t:
            try:
                t.extractall(LLAMA_SRC, filter="data")
            except TypeError:  # Pythons before 3.11.4 / 3.12: no filter argument
                t.extractall(LLAMA_SRC)
        return download_llama(a)
    return os.path.join(trees[-1], "vendor", "llama.cpp")


def build_llama(src, sdist):
    """Configures `src` into build/llama.cpp and builds llama-bench (nice -n 19, 2 jobs); returns
    (path of llama-bench, seconds, cmake flags)."""
    home = cmake_cache(LLAMA_BUILD).get("CMAKE_HOME_DIRECTORY")
    if home and os.path.realpath(home) != os.path.realpath(src):
        raise Skip(f"{LLAMA_BUILD} was configured from {home}, not {src}: remove it, or pass "
                   f"--llama-dir {LLAMA_BUILD} to use that build")
    flags = ["-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF", "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_TESTS=OFF",
             "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_OPENSSL=OFF"]
    if sdist.get("commit"):
        # the sdist's .git names a git directory that it does not hold: the commit comes from
        # its CHANGELOG, and CMake is kept from asking git
        flags += [f"-DLLAMA_BUILD_COMMIT={sdist['commit']}", "-DGIT_EXECUTABLE=/bin/false"]
    logs = os.path.join(LLAMA_BUILD, "..", "llama.cpp-logs")
    t0 = time.perf_counter()
    cmd = niced(["cmake", "-S", src, "-B", LLAMA_BUILD] + flags)
    progress(f"configuring llama.cpp: {' '.join(cmd)}")
    if run_logged(cmd, os.path.join(logs, "configure.log")) != 0:
        raise Skip(f"configuring llama.cpp failed: {last_error(os.path.join(logs, 'configure.log'))}")
    cmd = niced(["cmake", "--build", LLAMA_BUILD, "--target", "llama-bench", f"-j{JOBS}"])
    progress(f"building llama.cpp: {' '.join(cmd)} (about 5 minutes on 2 cores)")
    if run_logged(cmd, os.path.join(logs, "build.log")) != 0:
        raise Skip(f"building llama.cpp's llama-bench failed: {last_error(os.path.join(logs, 'build.log'))}")
    seconds = time.perf_counter() - t0
    bench = os.path.join(LLAMA_BUILD, "bin", "llama-bench")
    if not is_exe(bench):
        raise Skip(f"building llama.cpp left no {bench}")
    progress(f"llama.cpp's llama-bench configured and built (or found up to date) in {seconds:.0f} s: {bench}")
    return bench, seconds, flags


def find_llama(a, p):
    """{"bench", "src", "how", "build_s", "cmake_flags", "sdist"}; raises Skip when there is none."""
    d, name = (a.llama_dir, "--llama-dir") if a.llama_dir else (os.environ.get("LLAMA_CPP_DIR"), "LLAMA_CPP_DIR")
    out = {"build_s": None, "cmake_flags": None}
    if d:
        d = os.path.abspath(d)
        if is_exe(os.path.join(d, "bin", "llama-bench")):
            src = cmake_cache(d).get("CMAKE_HOME_DIRECTORY")
            out.update(bench=os.path.join(d, "bin", "llama-bench"), src=src if src and is_llama_source(src) else None,
                       how=f"{name} {d} (a build)")
        elif is_llama_source(d):
            prebuilt = os.path.join(d, "build", "bin", "llama-bench")
            if is_exe(prebuilt):
                out.update(bench=prebuilt, src=d, how=f"{name} {d} (a source tree, its build/)")
            else:
                bench, s, flags = build_llama(d, sdist_info(d))
                out.update(bench=bench, src=d, how=f"{name} {d} (a source tree, built into {LLAMA_BUILD})",
                           build_s=s, cmake_flags=flags)
        else:
            p.error(f"{name} {d}: accepted values: a llama.cpp build directory (holding bin/llama-bench) "
                    "or a llama.cpp source tree (holding CMakeLists.txt and convert_hf_to_gguf.py)")
    elif a.build_llama:
        src = download_llama(a)
        bench, s, flags = build_llama(src, sdist_info(src))
        out.update(bench=bench, src=src, how="--build-llama (PyPI's llama-cpp-python sdist, its vendor/llama.cpp)",
                   build_s=s, cmake_flags=flags)
    elif is_exe(os.path.join(LLAMA_BUILD, "bin", "llama-bench")):
        src = cmake_cache(LLAMA_BUILD).get("CMAKE_HOME_DIRECTORY")
        out.update(bench=os.path.join(LLAMA_BUILD, "bin", "llama-bench"), src=src if src and is_llama_source(src) else None,
                   how=f"{LLAMA_BUILD} (an earlier --build-llama)")
    else:
        raise Skip("no llama.cpp: pass --llama-dir DIR (a build with bin/llama-bench, or a source tree), "
                   "set LLAMA_CPP_DIR, or --build-llama (PyPI's llama-cpp-python sdist, its vendor/llama.cpp "
                   f"built into {LLAMA_BUILD}; about 5 minutes on 2 cores)")
    out["sdist"] = sdist_info(out["src"]) if out["src"] else {}
    cache = cmake_cache(os.path.dirname(os.path.dirname(out["bench"])))
    out["cmake_commit"] = cache.get("LLAMA_BUILD_COMMIT")
    return out


# ---- the converter's Python ------------------------------------------------------------------
CONVERT_IMPORTS = "import torch, numpy, transformers, sentencepiece, yaml, tqdm, requests"


def imports_ok(py, code):
    try:
        return subprocess.run([py, "-c", code], capture_output=True, text=True).returncode == 0
    except OSError:
        return False


def torch_python(a):
    cands = [a.torch_python] if a.torch_python else [os.path.join(ROOT, "build/torch-venv/bin/python"), sys.executable]
    for py in cands:
        if is_exe(py) and imports_ok(py, "import torch, numpy"):
            return py
    raise Skip(f"no Python with torch and numpy for llama.cpp's converter among {', '.join(cands)}: "
               "pass --torch-python PY")


def convert_pins(src):
    """llama.cpp's pins of transformers and sentencepiece (requirements/), as pip arguments."""
    pins = {"transformers": "transformers", "sentencepiece": "sentencepiece"}
    for path in glob.glob(os.path.join(src, "requirements", "requirements-convert*.txt")):
        with open(path) as f:
            for ln in f:
                ln = ln.split("#")[0].strip()
                for k in pins:
                    if re.match(re.escape(k) + r"\s*[=<>~!]", ln):
                        pins[k] = ln.replace(" ", "")
    return list(pins.values())


def setup_convert_venv(a, src):
    """python -m venv DIR with --torch-python's torch and numpy on its path (a .pth file), then
    DIR/bin/pip install transformers, sentencepiece (llama.cpp's pins) and gguf-py's dependencies."""
    base = torch_python(a)
    venv = a.convert_venv
    progress(f"--setup-convert-venv: {base} -m venv {venv}")
    if subprocess.run([base, "-m", "venv", venv], stdout=sys.stderr).returncode != 0:
        raise Skip(f"{base} -m venv {venv} failed (Debian: apt-get install python3-venv)")
    r = subprocess.run([base, "-c", "import json, os, numpy, torch; print(json.dumps(sorted({os.path.dirname(os.path."
                        "dirname(m.__file__)) for m in (torch, numpy)})))"], capture_output=True, text=True, check=True)
    vpy = os.path.join(venv, "bin", "python")
    site = subprocess.run([vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, "compare_llamacpp_base.pth"), "w") as f:
        f.write("\n".join(json.loads(r.stdout)) + "\n")
    pkgs = convert_pins(src) + ["pyyaml", "tqdm", "requests"]
    progress(f"--setup-convert-venv: {vpy} -m pip install {' '.join(pkgs)} (PyPI)")
    if subprocess.run(niced([vpy, "-m", "pip", "install"] + pkgs), stdout=sys.stderr).returncode != 0:
        raise Skip(f"pip install {' '.join(pkgs)} into {venv} failed")


def convert_python(a, src):
    vpy = os.path.join(a.convert_venv, "bin", "python")
    if is_exe(vpy) and imports_ok(vpy, CONVERT_IMPORTS):
        return vpy
    if not (a.setup_convert_venv or a.build_llama):
        raise Skip(f"{a.convert_venv} cannot run llama.cpp's convert_hf_to_gguf.py ({CONVERT_IMPORTS[7:]}): "
                   "--setup-convert-venv makes it (PyPI)")
    setup_convert_venv(a, src)
    if not imports_ok(vpy, CONVERT_IMPORTS):
        raise Skip(f"{vpy} still cannot {CONVERT_IMPORTS} after --setup-convert-venv")
    return vpy


# ---- the model: a Hugging Face directory by dtrain export, then GGUF by llama.cpp's converter --
def hf_config():
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": MODEL["d_model"],
            "intermediate_size": MODEL["d_ff"], "num_hidden_layers": MODEL["layers"],
            "num_attention_heads": MODEL["heads"], "num_key_value_heads": MODEL["heads"],
            "max_position_embeddings": MODEL["context"], "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
            "tie_word_embeddings": False, "vocab_size": MODEL["vocab"], "hidden_act": "silu",
            "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32", "bos_token_id": 1,
            "eos_token_id": 2}


def param_count():
    d, f, v, n = MODEL["d_model"], MODEL["d_ff"], MODEL["vocab"], MODEL["layers"]
    return 2 * v * d + n * (4 * d * d + 3 * d * f + 2 * d) + d


def make_hf(a):
    """work/hf_f32 and work/hf_bf16 (the same random weights), remade when the shape changes."""
    work = a.work
    stamp = os.path.join(work, "model.json")
    want = {"config": hf_config(), "tokenizer": TOKENIZER_FIXTURE}
    try:
        with open(stamp) as f:
            same = json.load(f) == want
    except (OSError, ValueError):
        same = False
    if not same:
        for sub in ("shape", "hf_f32", "hf_bf16", "model-f32.gguf", "model-bf16.gguf"):
            path = os.path.join(work, sub)
            shutil.rmtree(path) if os.path.isdir(path) else (os.path.exists(path) and os.remove(path))
    shape = os.path.join(work, "shape")
    os.makedirs(shape, exist_ok=True)
    with open(os.path.join(shape, "config.json"), "w") as f:
        json.dump(hf_config(), f, indent=1)
    with open(os.path.join(TOKENIZER_FIXTURE, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    vocab = tok["model"]["vocab"]
    for i in range(len(vocab), MODEL["vocab"]):  # ids the model has and the fixture does not
        vocab[f"<extra_{i}>"] = i
    with open(os.path.join(shape, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    shutil.copy(os.path.join(TOKENIZER_FIXTURE, "tokenizer_config.json"), shape)
    dtrain = os.path.join(a.build, "dtrain")
    hf = {prec: os.path.join(work, f"hf_{prec}") for prec in PRECISIONS}
    steps = [(hf["f32"], ["--model", shape, "--random-init", "--precision", "f32"]),
             (hf["bf16"], ["--model", hf["f32"], "--precision", "bf16"])]
    for out, args in steps:
        if not os.path.isfile(os.path.join(out, "config.json")):
            cmd = [dtrain, "export"] + args + ["--hf", out]
            progress(" ".join(cmd))
            subprocess.run(niced(cmd), check=True, stdout=sys.stderr, env=base_env())
    with open(stamp, "w") as f:
        json.dump(want, f, indent=1)
    return hf


def make_gguf(a, hf, llama):
    """{prec: path or None}, {prec: reason} for those that could not be made."""
    ggufs, skipped = {}, {}
    try:
        if not llama["src"]:
            raise Skip(f"no llama.cpp source tree (with convert_hf_to_gguf.py) for {llama['bench']}")
        py = convert_python(a, llama["src"])
    except Skip as e:
        return {}, {prec: str(e) for prec in PRECISIONS}
    for prec in PRECISIONS:
        out = os.path.join(a.work, f"model-{prec}.gguf")
        if os.path.isfile(out):
            ggufs[prec] = out
            continue
        tmp = out + ".part"
        log = os.path.join(a.work, f"convert-{prec}.log")
        cmd = [py, os.path.join(llama["src"], "convert_hf_to_gguf.py"), hf[prec], "--outtype", prec, "--outfile", tmp]
        progress(f"converting to GGUF: {' '.join(cmd)}")
        if run_logged(niced(cmd), log, env=base_env()) != 0 or not os.path.isfile(tmp):
            skipped[prec] = f"convert_hf_to_gguf.py --outtype {prec} failed: {last_error(log)} (log: {log})"
            progress(skipped[prec])
            continue
        os.replace(tmp, out)
        ggufs[prec] = out
    return ggufs, skipped


# ---- the measurements ------------------------------------------------------------------------
def run_llama_bench(bench, gguf):
    cmd = [bench, "-m", gguf, "-t", str(THREADS), "-p", str(PROMPT_TOKENS), "-n", str(NEW_TOKENS), "-o", "json"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=base_env())
    if r.returncode != 0:
        lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
        raise Skip(f"llama-bench failed (exit status {r.returncode}): {lines[-1][:300] if lines else ''}")
    recs = json.loads(r.stdout)
    out = {"records": [{k: x.get(k) for k in ("build_commit", "build_number", "model_type", "model_size",
                                                "model_n_params", "n_threads", "n_prompt", "n_gen", "n_depth",
                                                "flash_attn", "avg_ts", "stddev_ts", "samples_ts", "cpu_info",
                                                "backends")} for x in recs]}
    for x in recs:
        if x.get("n_prompt") == PROMPT_TOKENS and x.get("n_gen") == 0:
            out["prefill"] = x["avg_ts"]
        elif x.get("n_prompt") == 0 and x.get("n_gen") == NEW_TOKENS:
            out["decode"] = x["avg_ts"]
    if "prefill" not in out or "decode" not in out:
        raise Skip(f"llama-bench's JSON has no pp{PROMPT_TOKENS} and tg{NEW_TOKENS} records")
    return out


def run_dtrain(a, hf_dir, prec):
    env = dict(base_env(), OMP_NUM_THREADS=str(THREADS))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "generate.json")
        cmd = [os.path.join(a.build, "dtrain"), "generate", "--model", hf_dir, "--precision", prec, "--prompt", PROMPT,
               "--max-new-tokens", str(NEW_TOKENS), "--ignore-eos", "--json", out]
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        if r.returncode != 0:
            sys.stderr.write(r.stderr[-3000:])
            raise RuntimeError(f"dtrain generate --precision {prec}: exit status {r.returncode}")
        with open(out) as f:
            st = json.load(f)
    n = len(st["prompt_tokens"])
    if st["new_tokens"] != NEW_TOKENS:
        raise RuntimeError(f"dtrain generate made {st['new_tokens']} tokens, not {NEW_TOKENS}")
    ttft, itl = st["time_to_first_token_s"], st["inter_token_latency_s"]
    return {"prompt_tokens": n, "time_to_first_token_s": ttft, "inter_token_latency_s": itl,
            "prefill": n / ttft, "decode": 1.0 / itl}


MEMCPY = r"""
import json, time, numpy as np
n = 1 << 30
src = np.ones(n, dtype=np.uint8); dst = np.empty_like(src); np.copyto(dst, src)
ts = []
for _ in range(5):
    t0 = time.perf_counter(); np.copyto(dst, src); ts.append(time.perf_counter() - t0)
print(json.dumps({"numpy": np.__version__, "seconds": ts, "gbps": 2 * n / sorted(ts)[2] / 1e9}))
"""


def memcpy_bandwidth(a):
    """numpy's memcpy of 1 GiB on one thread, read + write bytes per second (median of 5)."""
    for py in [sys.executable, a.torch_python, os.path.join(a.convert_venv, "bin", "python")]:
        if py and is_exe(py):
            r = subprocess.run([py, "-c", MEMCPY], capture_output=True, text=True)
            if r.returncode == 0:
                return dict(json.loads(r.stdout.strip().splitlines()[-1]), python=py)
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build/default"), help="libdtrain build directory")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", help="write every figure here")
    p.add_argument("--llama-dir", metavar="DIR",
                   help="llama.cpp: a build directory (bin/llama-bench) or a source tree (default: $LLAMA_CPP_DIR)")
    p.add_argument("--build-llama", action="store_true",
                   help="download PyPI's llama-cpp-python sdist into build/llama-src and build its vendor/llama.cpp "
                        "into build/llama.cpp (llama-bench only); implies --setup-convert-venv")
    p.add_argument("--setup-convert-venv", action="store_true",
                   help="make --convert-venv: a venv seeing --torch-python's torch, plus transformers and "
                        "sentencepiece from PyPI")
    p.add_argument("--torch-python", metavar="PY",
                   help="a Python with torch and numpy for llama.cpp's converter (default: build/torch-venv/bin/python, "
                        "else the Python running this script)")
    p.add_argument("--convert-venv", metavar="DIR", default=os.path.join(ROOT, "build/llama-venv"),
                   help="venv that runs convert_hf_to_gguf.py (default: build/llama-venv)")
    p.add_argument("--work", metavar="DIR", default=os.path.join(ROOT, "build/compare_llamacpp"),
                   help="where the model directories and GGUF files go (kept between runs)")
    a = p.parse_args()
    if a.rounds < 1:
        p.error(f"--rounds {a.rounds}: accepted values are integers >= 1")
    a.build, a.work, a.convert_venv = (os.path.abspath(x) for x in (a.build, a.work, a.convert_venv))
    if not is_exe(os.path.join(a.build, "dtrain")):
        p.error(f"--build {a.build}: accepted values: a libdtrain build directory holding the dtrain CLI")
    if a.torch_python and not is_exe(a.torch_python):
        p.error(f"--torch-python {a.torch_python}: accepted values: an executable Python that imports torch and numpy")
    if os.path.exists(a.convert_venv) and not os.path.isdir(a.convert_venv):
        p.error(f"--convert-venv {a.convert_venv}: not a directory; accepted values: a venv directory, or a path "
                "where --setup-convert-venv makes one")
    if a.torch_python:
        a.torch_python = os.path.abspath(a.torch_python)

    def skip(why, **extra):
        print(f"compare_llamacpp: skipped: {why}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump(dict({"skipped": why}, **extra), f, indent=1)
        return 0

    try:
        llama = find_llama(a, p)
    except Skip as e:
        return skip(str(e))
    version = llama["sdist"].get("commit") or llama["cmake_commit"] or "unknown commit"
    progress(f"llama.cpp {version}: {llama['bench']} ({llama['how']})")
    hf = make_hf(a)
    ggufs, skipped = make_gguf(a, hf, llama)
    if not ggufs:
        return skip(f"no GGUF model for llama.cpp: {skipped.get('f32')}", llama={k: llama[k] for k in ("bench", "src")})
    bw = memcpy_bandwidth(a)
    progress(f"memcpy (numpy, one thread, 1 GiB): {bw['gbps']:.1f} GB/s read + write" if bw else
             "memcpy: no Python with numpy; no bandwidth bound")
    if os.cpu_count() != THREADS:
        progress(f"this machine has {os.cpu_count()} hardware threads: dtrain's kernel pool takes them all "
                 f"(it has no thread flag), llama-bench runs {THREADS}")
    # runs[prec]["llama"|"dtrain"] = [per-round dicts]
    runs = {prec: {"llama": [], "dtrain": []} for prec in PRECISIONS}
    for r in range(a.rounds):
        for prec in PRECISIONS:
            if prec in ggufs and prec not in skipped:
                progress(f"round {r + 1}/{a.rounds}: {prec}: llama.cpp")
                try:
                    runs[prec]["llama"].append(run_llama_bench(llama["bench"], ggufs[prec]))
                except Skip as e:
                    skipped[prec] = str(e)
                    progress(f"{prec}: {e}")
            progress(f"round {r + 1}/{a.rounds}: {prec}: libdtrain")
            d = run_dtrain(a, hf[prec], prec)
            if d["prompt_tokens"] != PROMPT_TOKENS:
                progress(f"the prompt encodes to {d['prompt_tokens']} tokens, not {PROMPT_TOKENS}: "
                         "libdtrain's prefill is over those")
            runs[prec]["dtrain"].append(d)
    nparams = param_count()
    n_threads_dtrain = os.cpu_count()
    print(f"compare_llamacpp: Llama {MODEL['layers']} layers, d_model {MODEL['d_model']}, {MODEL['heads']} heads, "
          f"d_ff {MODEL['d_ff']}, vocab {MODEL['vocab']} ({nparams / 1e6:.1f}M parameters, random weights); batch 1, "
          f"prompt {PROMPT_TOKENS} tokens, {NEW_TOKENS} new; {THREADS} threads; "
          f"{'medians of %d rounds' % a.rounds if a.rounds > 1 else 'one round'}")
    sd = llama["sdist"]
    src_note = (f"vendor/llama.cpp of PyPI's llama-cpp-python {sd['llama_cpp_python']}"
                if sd.get("llama_cpp_python") else (llama["src"] or "source unknown"))
    print(f"  llama.cpp {version} ({src_note}): llama-bench -t {THREADS} -p {PROMPT_TOKENS} -n {NEW_TOKENS}, "
          f"{os.path.relpath(llama['bench'], ROOT)}")
    print(f"  libdtrain: dtrain generate --precision P --max-new-tokens {NEW_TOKENS} --ignore-eos, "
          f"{os.path.relpath(a.build, ROOT)}/dtrain ({n_threads_dtrain} threads)")
    if bw:
        print(f"  bound: weight bytes / numpy memcpy on one thread, 1 GiB, read + write bytes: {bw['gbps']:.1f} GB/s")
    print(f"{'setting':<14} {'llama.cpp tok/s':>15} {'libdtrain tok/s':>15} {'ratio':>6} {'bound tok/s':>11} "
          f"{'llama.cpp/bound':>15} {'libdtrain/bound':>15}")
    report = {"model": dict(MODEL, params=nparams, tokenizer=TOKENIZER_FIXTURE + " (vocabulary padded to 32000)",
                            hf_dirs=hf, gguf=ggufs),
              "prompt": PROMPT, "prompt_tokens": PROMPT_TOKENS, "new_tokens": NEW_TOKENS, "threads": THREADS,
              "dtrain_threads": n_threads_dtrain, "rounds": a.rounds, "build": a.build,
              "openblas_coretype": base_env()["OPENBLAS_CORETYPE"],
              "llama_cpp": {"version": version, "bench": llama["bench"], "src": llama["src"], "how": llama["how"],
                            "sdist": sd, "cmake_commit": llama["cmake_commit"], "build_s": llama["build_s"],
                            "cmake_flags": llama["cmake_flags"], "jobs": JOBS},
              "memcpy": bw, "skipped": skipped, "settings": {}}
    for prec in PRECISIONS:
        wbytes = nparams * BYTES[prec]
        bound = bw["gbps"] * 1e9 / wbytes if bw else None
        for phase in ("prefill", "decode"):
            key = f"{phase}_{prec}"
            label = f"{phase} {prec}"
            dr = [x[phase] for x in runs[prec]["dtrain"]]
            lr = [x[phase] for x in runs[prec]["llama"]]
            d = statistics.median(dr)
            lm = statistics.median(lr) if lr and prec not in skipped else None
            rep = {"precision": prec, "phase": phase, "dtrain_tokens_per_s": d, "dtrain_runs": dr,
                   "llama_tokens_per_s": lm, "llama_runs": lr, "ratio": d / lm if lm else None,
                   "weight_bytes": wbytes}
            if phase == "decode" and bound:
                rep.update(bound_tokens_per_s=bound, dtrain_fraction_of_bound=d / bound,
                           llama_fraction_of_bound=lm / bound if lm else None)
            if phase == "prefill":
                rep["dtrain_time_to_first_token_s"] = [x["time_to_first_token_s"] for x in runs[prec]["dtrain"]]
                rep["dtrain_prompt_tokens"] = [x["prompt_tokens"] for x in runs[prec]["dtrain"]]
            else:
                rep["dtrain_inter_token_latency_s"] = [x["inter_token_latency_s"] for x in runs[prec]["dtrain"]]
            rep["llama_bench_records"] = [x["records"] for x in runs[prec]["llama"]]
            report["settings"][key] = rep
            bcol = f"{bound:>11.1f}" if phase == "decode" and bound else f"{'-':>11}"
            lb = f"{lm / bound:>15.2f}" if phase == "decode" and bound and lm else f"{'-':>15}"
            db = f"{d / bound:>15.2f}" if phase == "decode" and bound else f"{'-':>15}"
            if lm:
                print(f"{label:<14} {lm:>15.1f} {d:>15.1f} {d / lm:>6.2f} {bcol} {lb} {db}")
            else:
                why = skipped.get(prec, "no llama.cpp figure")
                print(f"{label:<14} {'-':>15} {d:>15.1f} {'-':>6} {bcol} {'-':>15} {db}  llama.cpp skipped: {why}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
