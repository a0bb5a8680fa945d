#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU: builds libdtrain with CUDA (sm_90 unless
# DTRAIN_CUDA_ARCHITECTURES says otherwise), runs the GPU tests (every CUDA op against its
# CPU twin per dtype; GPT training on the GPU against the CPU; NCCL), then bench_gpu (GEMM
# against cuBLAS direct, attention, ~350M GPT training MFU, decode at batch 1 and 64).
# Writes gpu_check.json (a summary), the tests' gtest JSON and bench_gpu.json into $OUT
# (the device tool's output folder) or build/gpu-check. Aims to finish in under 8 minutes.
#   bash tests/gpu/run.sh [--quick]     (--quick: bench_gpu --quick)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$root/build/gpu-check}
build=$root/build/gpu
mkdir -p "$out"
t0=$(date +%s)
step() { echo "[gpu-check $(( $(date +%s) - t0 ))s] $*" >&2; }
bench_args=()
[[ "${1:-}" == "--quick" ]] && bench_args+=(--quick)

status=ok
missing=()
for tool in cmake g++ /usr/local/cuda/bin/nvcc nvidia-smi; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if ((${#missing[@]})); then
  step "missing: ${missing[*]} (run tools/install-deps.sh where the package registries are reachable)"
  printf '{"status":"missing_tools","missing":"%s"}\n' "${missing[*]}" > "$out/gpu_check.json"
  exit 1
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$out/gpu.txt" 2>&1
step "gpu: $(cat "$out/gpu.txt")"

step "configure"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDTRAIN_WITH_CUDA=ON -DDTRAIN_WITH_NCCL=AUTO \
      -DDTRAIN_CUDA_ARCHITECTURES="${DTRAIN_CUDA_ARCHITECTURES:-90}" > "$out/configure.log" 2>&1 || status=configure_failed
if [[ $status == ok ]]; then
  step "build (log: build.log)"
  targets=(ops_test train_test bench_gpu)
  grep -q 'NCCL=ON' "$out/configure.log" && targets+=(nccl_test)
  cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" > "$out/build.log" 2>&1 || status=build_failed
fi

declare -A result
if [[ $status == ok ]]; then
  for t in ops_test train_test nccl_test; do
    [[ -x "$build/tests/$t" ]] || continue
    step "test $t"
    if "$build/tests/$t" --gtest_output=json:"$out/$t.json" > "$out/$t.log" 2>&1; then result[$t]=pass
    else result[$t]=fail; status=tests_failed; fi
    grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/$t.log" >&2
  done
  step "bench_gpu ${bench_args[*]:-}"
  timeout 330 "$build/bench/bench_gpu" "${bench_args[@]}" --json "$out/bench_gpu.json" 2>"$out/bench_gpu.progress" \
    | tee "$out/bench_gpu.txt" || { [[ $status == ok ]] && status=bench_failed; }
fi

{
  printf '{"status":"%s","seconds":%d,"gpu":"%s","tests":{' "$status" $(( $(date +%s) - t0 )) "$(tr -d '"\n' < "$out/gpu.txt")"
  sep=""
  for t in "${!result[@]}"; do printf '%s"%s":"%s"' "$sep" "$t" "${result[$t]}"; sep=","; done
  printf '},"bench":'
  if [[ -s "$out/bench_gpu.json" ]]; then cat "$out/bench_gpu.json"; else printf 'null'; fi
  printf '}\n'
} > "$out/gpu_check.json"
step "done: $status (summary: $out/gpu_check.json)"
[[ $status == ok ]]
