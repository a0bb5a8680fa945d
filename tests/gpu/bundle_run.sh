#!/usr/bin/env bash
# The GPU check, run on the GPU machine from a bundle built elsewhere (tests/gpu/bundle.sh
# puts this file in the bundle as run.sh). Needs there: a driver, the CUDA runtime and
# cuBLAS (the toolkit's lib64 or the nvidia-* wheels), NCCL (the nvidia-nccl-cu13 wheel),
# python3 with PyTorch; nothing is built or fetched.
#
#   bash DIR/run.sh [--quick] [--budget SECONDS]      (default budget 330 s)
#
# 1. unpacks payload.tar.gz; finds the libraries (NCCL's folder through python3);
# 2. preflight: nvidia-smi answers, the CPU has the instructions the bundle was compiled
#    for, ldd resolves every binary; anything missing is named and ends the run;
# 3. each test under its own timeout (ops_test, train_test, nccl_test), then bench_gpu,
#    then the same GPT in PyTorch (torch_anchor.py), then a short `dtrain train --device
#    cuda:0` and `dtrain eval`; each step gets what is left of the budget, up to its cap;
# 4. writes gpu_check.json (status, per-step results with seconds, libdtrain against PyTorch
#    ratios, both benchmarks' JSON) and every log into $OUT (or DIR/out).
# A step whose binary is not in the bundle is "not_built", never "pass". Exit 0 only when
# every step passed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
quick=()
budget=330
while (($#)); do
  case "$1" in
    --quick) quick=(--quick) ;;
    --budget) budget=$2; shift ;;
    *) echo "usage: bash run.sh [--quick] [--budget SECONDS]" >&2; exit 2 ;;
  esac
  shift
done
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
say() { echo "[gpu-check $(elapsed)s] $*" >&2; }
declare -A result secs detail
order=()
status=ok
note=""
json_str() { python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1" 2>/dev/null || printf '"%s"' "${1//\"/}"; }

summary() {
  {
    printf '{"status":"%s","note":%s,"seconds":%d,"budget_s":%d,' "$status" "$(json_str "$note")" "$(elapsed)" "$budget"
    printf '"gpu":%s,"manifest":' "$(json_str "$(cat "$out/gpu.txt" 2>/dev/null)")"
    if [[ -s "$here/manifest.json" ]]; then cat "$here/manifest.json"; else printf 'null'; fi
    printf ',"steps":{'
    local sep=""
    for s in "${order[@]}"; do
      printf '%s"%s":{"result":"%s","seconds":%s,"detail":%s}' "$sep" "$s" "${result[$s]}" "${secs[$s]:-0}" "${detail[$s]:-null}"
      sep=","
    done
    printf '},"bench_gpu":'
    if [[ -s "$out/bench_gpu.json" ]]; then cat "$out/bench_gpu.json"; else printf 'null'; fi
    printf ',"torch":'
    if [[ -s "$out/torch_anchor.json" ]]; then cat "$out/torch_anchor.json"; else printf 'null'; fi
    printf ',"ratios":'
    if [[ -s "$out/ratios.json" ]]; then cat "$out/ratios.json"; else printf 'null'; fi
    printf '}\n'
  } > "$out/gpu_check.json"
  say "done: $status (summary: $out/gpu_check.json)"
}
give_up() { status=$1; note=$2; say "$note"; summary; exit 1; }

# ---- 1. unpack, and find the libraries
work=${TMPDIR:-/tmp}/dtrain-gpu-bundle
rm -rf "$work" && mkdir -p "$work"
tar -C "$work" -xzf "$here/payload.tar.gz" || give_up unpack_failed "cannot unpack $here/payload.tar.gz"
libs=("$work/lib")
site=$(python3 -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()] + sys.path))' 2>/dev/null)
for sub in nvidia/nccl/lib nvidia/cublas/lib nvidia/cuda_runtime/lib nvidia/cu13/lib; do
  while read -r d; do [[ -n "$d" && -d "$d/$sub" ]] && libs+=("$d/$sub"); done <<< "$site"
done
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
  [[ -d "$d" ]] && libs+=("$d")
done
export LD_LIBRARY_PATH
LD_LIBRARY_PATH=$(IFS=:; echo "${libs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "$LD_LIBRARY_PATH" | tr ':' '\n' > "$out/library_path.txt"

# ---- 2. preflight
command -v nvidia-smi >/dev/null || give_up preflight_failed "nvidia-smi is missing: is this the GPU machine?"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$out/gpu.txt" 2>&1 ||
  give_up preflight_failed "nvidia-smi failed: $(head -c 300 "$out/gpu.txt")"
say "gpu: $(cat "$out/gpu.txt")"
gpus=$(grep -c . "$out/gpu.txt")
want_flags=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cpu_flags"])' "$here/manifest.json" 2>/dev/null)
have_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
missing=()
for f in $want_flags; do [[ "$have_flags" == *" $f "* ]] || missing+=("$f"); done
((${#missing[@]} == 0)) || give_up preflight_failed "this CPU lacks ${missing[*]}, which the bundle was compiled for: rebuild it with DTRAIN_BUNDLE_HOST_ARCH=x86-64-v3"
unresolved=""
if command -v ldd >/dev/null; then
  for f in "$work"/bin/* "$work"/lib/*.so*; do
    nf=$(ldd "$f" 2>&1 | awk '/not found/ {print $1}' | tr '\n' ' ')
    [[ -n "$nf" ]] && unresolved+="$(basename "$f"): $nf; "
  done
fi
[[ -z "$unresolved" ]] || give_up preflight_failed "libraries not found (library path in library_path.txt): $unresolved"
say "preflight ok (${#libs[@]} library folders)"

# ---- 3. the steps
# run_step NAME CAP_SECONDS COMMAND...: runs under min(cap, what is left of the budget).
run_step() {
  local name=$1 cap=$2
  shift 2
  order+=("$name")
  local left=$((budget - $(elapsed)))
  ((left < cap)) && cap=$left
  local prog=$1
  [[ "$prog" == python3 ]] && prog=$2
  if [[ ! -f "$prog" ]]; then result[$name]=not_built; [[ $status == ok ]] && status=incomplete; say "$name: not built"; return; fi
  if ((cap < 10)); then result[$name]=no_time; [[ $status == ok ]] && status=incomplete; say "$name: no time left in the budget"; return; fi
  say "$name (up to ${cap}s, log: $name.log)"
  local s0 rc
  s0=$(date +%s)
  timeout --kill-after=10 "$cap" "$@" > "$out/$name.log" 2>&1
  rc=$?
  secs[$name]=$(($(date +%s) - s0))
  if ((rc == 0)); then result[$name]=pass
  elif ((rc == 124 || rc == 137)); then result[$name]=timeout; status=failed
  else result[$name]=fail; status=failed; fi
  # A test that skipped (no usable GPU after all) passed nothing: the step is "skipped",
  # unless the test needs more GPUs than this machine has (gpus_needed below).
  if [[ -s "$out/$name.json" && $name == *_test ]]; then
    detail[$name]=$(python3 - "$out/$name.json" "$gpus" <<'PY' 2>/dev/null || echo null
import json, sys
gpus_needed = {"GpuTrain.DataParallelOverTwoGpusMatchesOneGpu": 2}
cases = [c for s in json.load(open(sys.argv[1])).get("testsuites", []) for c in s.get("testsuite", [])]
names = lambda pick: [c["classname"] + "." + c["name"] for c in cases if pick(c)]
skipped = names(lambda c: c.get("result") == "SKIPPED")
failed = names(lambda c: bool(c.get("failures")))
unexpected = [n for n in skipped if gpus_needed.get(n, 1) <= int(sys.argv[2])]
print(json.dumps({"tests": len(cases), "passed": len(cases) - len(skipped) - len(failed), "failed": failed,
                  "skipped": skipped, "skipped_unexpectedly": unexpected}))
PY
)
    if [[ ${result[$name]} == pass && "${detail[$name]}" != *'"skipped_unexpectedly": []'* ]]; then result[$name]=skipped; fi
  fi
  if [[ ${result[$name]} == pass ]] && grep -q 'nothing to measure' "$out/$name.log"; then result[$name]=skipped; fi
  [[ ${result[$name]} == skipped && $status == ok ]] && status=incomplete
  grep -E '^\[  (PASSED|FAILED) |^\[  SKIPPED \] [0-9]|^(train|decode|torch|gemm|attention|bench_gpu|dtrain)' "$out/$name.log" | head -20 >&2
  say "$name: ${result[$name]} (${secs[$name]}s)"
}
for t in ops_test train_test nccl_test; do
  run_step "$t" 120 "$work/bin/$t" --gtest_output=json:"$out/$t.json"
done
run_step bench_gpu 150 "$work/bin/bench_gpu" "${quick[@]}" --json "$out/bench_gpu.json"
run_step torch_anchor 120 python3 "$work/torch_anchor.py" "${quick[@]}" --json "$out/torch_anchor.json"
cli=$work/cli
run_step cli_train 60 "$work/bin/dtrain" train --data addition --layers 2 --d-model 128 --heads 4 --steps 300 \
  --batch 64 --lr 3e-3 --device cuda:0 --out "$cli"
run_step cli_eval 30 "$work/bin/dtrain" eval --checkpoint "$cli/ckpt" --data addition

# ---- 4. libdtrain against PyTorch, same GPU, same run
python3 - "$out/bench_gpu.json" "$out/torch_anchor.json" > "$out/ratios.json" 2>/dev/null <<'EOF' || rm -f "$out/ratios.json"
import json, sys
ours, torch = (json.load(open(p)) for p in sys.argv[1:3])
def ours_fig(section, key):
    # bench's Report JSON: a list of records, each with "section", "name" and figures
    for r in ours.get("results", []):
        if (r.get("section"), r.get("name")) == section:
            return r.get(key)
pairs = {
    "train_tokens_per_s": (ours_fig(("train", "gpt"), "tokens_per_s"), torch["train"]["tokens_per_s"]),
    "train_mfu": (ours_fig(("train", "gpt"), "mfu"), torch["train"]["mfu"]),
    "decode_batch1_tokens_per_s": (ours_fig(("decode", "batch1"), "tokens_per_s"), torch["decode_batch1"]["tokens_per_s"]),
    "decode_batch64_tokens_per_s": (ours_fig(("decode", "batch64"), "tokens_per_s"), torch["decode_batch64"]["tokens_per_s"]),
}
out = {k: {"libdtrain": a, "torch": b, "libdtrain_over_torch": (a / b if a and b else None)} for k, (a, b) in pairs.items()}
for k, v in out.items():
    r = v["libdtrain_over_torch"]
    print(f"{k}: libdtrain {v['libdtrain']} torch {v['torch']} ratio {r if r is None else round(r, 3)}", file=sys.stderr)
print(json.dumps(out))
EOF
summary
[[ $status == ok ]]
