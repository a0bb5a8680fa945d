#!/usr/bin/env bash
# Checks a GPU bundle (tests/gpu/bundle.sh) on this machine, without a GPU, as the GPU
# machine will load it: ldd over every binary and library of the payload must resolve
#   - to the bundle's own lib/,
#   - to the CUDA toolkit's runtime and cuBLAS (libcudart, libcublas, libcublasLt) and to
#     nothing else of the toolkit,
#   - to libnccl.so.2 in a folder laid out as the nvidia-nccl-cu13 wheel lays it out
#     (nvidia/nccl/lib), never the toolkit's copy,
#   - or to the C and C++ runtime every Linux has (libc, libm, libstdc++, libgcc_s, ...);
# only the driver's libcuda.so.1 may be missing. Also: every executable the GPU check runs
# is there, libdtrain needs no MPI, cuBLAS and NCCL (loaded at run time, not linked) load by
# their SONAMEs from the same path, and the bundle fits the carry limit (64 MiB).
#   bash tests/gpu/check_bundle.sh DIR        prints one line per problem; exit 1 if any
set -euo pipefail
dir=$(cd "$1" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
cuda_lib=$(readlink -f "$cuda/lib64")
[[ -d "$cuda_lib" ]] || cuda_lib=$(readlink -f "$cuda/lib")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
problems=0
problem() { echo "check_bundle: $*" >&2; problems=$((problems + 1)); }

for f in run.sh payload.tar.gz manifest.json; do [[ -f "$dir/$f" ]] || problem "$dir/$f is missing"; done
((problems == 0)) || exit 1
limit=$((64 * 1024 * 1024))
size=$(du -sb "$dir" | cut -f1)
((size <= limit)) || problem "the bundle is $size bytes; the device tool carries at most $limit"
tar -C "$work" -xzf "$dir/payload.tar.gz"

wheel=$work/site-packages/nvidia/nccl/lib
mkdir -p "$wheel"
nccl=$(readlink -f "$cuda_lib/libnccl.so.2" 2>/dev/null || true)
if [[ -f "$nccl" ]]; then cp "$nccl" "$wheel/libnccl.so.2"; else problem "no libnccl.so.2 under $cuda_lib to stand in for the wheel's"; fi

for e in dtrain ops_test train_test nccl_test bench_gpu; do
  [[ -x "$work/bin/$e" ]] || problem "bin/$e is not in the bundle (a test that is not built must never read as passed)"
done
[[ -f "$work/torch_anchor.py" ]] || problem "torch_anchor.py is not in the bundle"

source "$(dirname "$0")/bundle_libs.sh"
checked=0
for f in "$work"/bin/* "$work"/lib/*.so*; do
  checked=$((checked + 1))
  out=$(LD_LIBRARY_PATH="$work/lib:$wheel:$cuda_lib" ldd "$f" 2>&1) || { problem "ldd $(basename "$f") failed: $out"; continue; }
  while read -r name arrow where _; do
    [[ "$arrow" == "=>" ]] || continue
    short=$(basename "$f")
    if [[ "$where" == "not" ]]; then
      [[ "$name" == libcuda.so.1 ]] || problem "$short: $name not found"
      continue
    fi
    real=$(readlink -f "$where")
    case "$real" in
      "$work"/lib/*) ;;
      "$wheel"/*) [[ "$name" == libnccl.so.2 ]] || problem "$short: $name resolved in the NCCL wheel's folder" ;;
      "$cuda_lib"/*)
        [[ "$name" =~ $toolkit_re ]] || problem "$short: $name comes from the CUDA toolkit ($real); the GPU image has only its runtime, cuBLAS and NCCL's wheel" ;;
      *) [[ "$name" =~ $base_re ]] || problem "$short: $name resolves to $real, outside the bundle, the CUDA runtime and the base system" ;;
    esac
  done <<< "$out"
done
if readelf -d "$work/lib/libdtrain.so.0" | grep >/dev/null 'NEEDED.*libmpi'; then problem "lib/libdtrain.so.0 needs MPI"; fi
# cuBLAS and NCCL are loaded on first use (lib/core/shared_library.h), so ldd does not see
# them: each must load by its SONAME from the path run.sh sets (the toolkit's or the wheels').
cublas_so=$(ls "$cuda_lib" | grep -E '^libcublas\.so\.[0-9]+$' | head -1)
for so in "${cublas_so:-libcublas.so.MISSING}" libnccl.so.2; do
  LD_LIBRARY_PATH="$work/lib:$wheel:$cuda_lib" python3 -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' "$so" 2>/dev/null ||
    problem "$so, which libdtrain loads at run time, does not load from the bundle's library path"
done
# run.sh itself, where there is no GPU: it must stop at the preflight, say why, and still
# write a well-formed gpu_check.json (the GPU machine's first run reports the same way).
if ! command -v nvidia-smi >/dev/null; then
  if OUT="$work/out" TMPDIR="$work" bash "$dir/run.sh" > "$work/run.log" 2>&1; then
    problem "run.sh reported success on a machine without a GPU"
  fi
  python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
assert s["status"] == "preflight_failed" and "nvidia-smi" in s["note"], s' "$work/out/gpu_check.json" 2>> "$work/run.log" ||
    problem "run.sh without a GPU did not write a preflight_failed gpu_check.json: $(tail -3 "$work/run.log")"
fi
if ((problems)); then echo "check_bundle: $problems problem(s) in $dir" >&2; exit 1; fi
echo "check_bundle: $checked files resolve (bundle, CUDA runtime + cuBLAS, wheel NCCL, base system; libcuda.so.1 from the driver); $size of $limit bytes"
