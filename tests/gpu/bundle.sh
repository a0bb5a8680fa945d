#!/usr/bin/env bash
# Builds the GPU bundle: everything the GPU check needs, built on this machine, for a GPU
# machine that has a driver, the CUDA runtime and cuBLAS, NCCL as the pip wheel and PyTorch,
# but no compiler toolchain of ours, no Debian packages and no network (docs/gpu.md).
#
#   bash tests/gpu/bundle.sh [--from BUILD_DIR] DIR
#
# Without --from: configures build/gpu-bundle (Release, CUDA sm_90, NCCL on, no MPI, host
# code for x86-64-v3 so that any x86 host of an H100/H200 runs it) and builds there.
# --from BUILD_DIR: packs what that CUDA build already built (the ctest check does this:
# the same targets and link rules, no second build).
#
# DIR receives:
#   run.sh            the GPU check, run there (tests/gpu/bundle_run.sh)
#   payload.tar.gz    bin/ (dtrain, ops_test, train_test, nccl_test, bench_gpu, stripped)
#                     lib/ (libdtrain.so.0 without MPI and with cudart inside, and every
#                     library they need that is neither the CUDA toolkit's, NCCL's, nor
#                     the C/C++ runtime's: OpenBLAS and its Fortran runtime)
#                     torch_anchor.py (the same GPT in PyTorch)
#   manifest.json     commit, build settings, sizes
# and is then checked (tests/gpu/check_bundle.sh): ldd resolves everything but the driver
# against the bundle, the CUDA toolkit's runtime and cuBLAS and a wheel-style libnccl.so.2,
# and the whole of DIR fits the device tool's carry limit (64 MiB).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
from=""
if [[ "${1:-}" == "--from" ]]; then from=$(cd "$2" && pwd); shift 2; fi
[[ $# -eq 1 ]] || { echo "usage: bash tests/gpu/bundle.sh [--from BUILD_DIR] DIR" >&2; exit 2; }
dir=$1
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
say() { echo "[bundle] $*" >&2; }

executables=(dtrain ops_test train_test nccl_test bench_gpu)
if [[ -z "$from" ]]; then
  build=$root/build/gpu-bundle
  arch=${DTRAIN_BUNDLE_HOST_ARCH:-x86-64-v3}
  say "configure $build (CUDA sm_90, NCCL, no MPI, -march=$arch)"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDTRAIN_WITH_CUDA=ON -DDTRAIN_WITH_NCCL=ON \
        -DDTRAIN_WITH_MPI=OFF -DDTRAIN_CUDA_ARCHITECTURES=90 -DDTRAIN_ARCH="$arch" > "$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log" >&2; exit 1; }
  say "build (log: $dir.build.log)"
  cmake --build "$build" -j"$(nproc)" --target dtrain_portable dtrain_cli ops_test train_test nccl_test bench_gpu \
        > "$dir.build.log" 2>&1 || { tail -30 "$dir.build.log" >&2; exit 1; }
else
  build=$from
fi
cache=$build/CMakeCache.txt
setting() { sed -n "s/^$1:[A-Z]*=//p" "$cache"; }
[[ "$(setting DTRAIN_WITH_NCCL)" == ON ]] || { say "$build was configured without NCCL: nccl_test cannot be bundled"; exit 1; }

declare -A path=([dtrain]=$build/dtrain [ops_test]=$build/tests/ops_test [train_test]=$build/tests/train_test
                 [nccl_test]=$build/tests/nccl_test [bench_gpu]=$build/bench/bench_gpu)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for e in "${executables[@]}"; do
  [[ -x "${path[$e]}" ]] || { say "missing ${path[$e]}: build it first"; exit 1; }
  strip --strip-unneeded -o "$stage/bin/$e" "${path[$e]}"
done
strip --strip-unneeded -o "$stage/lib/libdtrain.so.0" "$build/portable/libdtrain.so.0"
cp "$root/tests/gpu/torch_anchor.py" "$stage/"

# The closure: every library ldd finds outside the CUDA toolkit and the base system goes
# into lib/ (under its SONAME), then the same for what those need.
source "$root/tests/gpu/bundle_libs.sh"
for _ in 1 2 3; do
  for f in "$stage"/bin/* "$stage"/lib/*.so*; do
    LD_LIBRARY_PATH="$stage/lib" ldd "$f" | awk '/=>/ {print $1, $3}' | while read -r name where; do
      [[ "$name" =~ $base_re || "$name" =~ $toolkit_re || "$name" =~ $driver_and_nccl_re || -e "$stage/lib/$name" ]] && continue
      [[ -f "$where" ]] || { say "$f needs $name, which this machine lacks too"; exit 1; }
      cp -L "$where" "$stage/lib/$name"
      say "carrying $name (from $where)"
    done
  done
done

# The host instructions the code may use, as /proc/cpuinfo names them: run.sh checks the GPU
# machine's CPU has them all before it runs anything (a missing one would be SIGILL).
cpu_flags() {
  local arch
  arch=$(setting DTRAIN_ARCH)
  case "$arch" in
    x86-64-v3) echo "avx avx2 bmi1 bmi2 f16c fma movbe" ;;
    x86-64-v4) echo "avx avx2 bmi1 bmi2 f16c fma movbe avx512f avx512bw avx512cd avx512dq avx512vl" ;;
    *) grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|avx2|fma|f16c|bmi1|bmi2|movbe|avx512[a-z0-9_]*)$' | sort -u | tr '\n' ' ' | sed 's/ $//' ;;
  esac
}
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$root" status --porcelain 2>/dev/null | grep -v >/dev/null '^??' && echo true || echo false)
tar -C "$stage" -czf "$dir/payload.tar.gz" bin lib torch_anchor.py
cp "$root/tests/gpu/bundle_run.sh" "$dir/run.sh"
files=$(cd "$stage" && find bin lib -type f -printf '    "%p": %s,\n' | sort | sed '$ s/,$//')
cat > "$dir/manifest.json" <<EOF
{
  "commit": "$commit", "uncommitted_changes": $dirty, "built": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "build_dir": "$build", "cuda_architectures": "$(setting DTRAIN_CUDA_ARCHITECTURES)",
  "host_arch": "$(setting DTRAIN_ARCH)", "blas": "$(setting DTRAIN_BLAS)",
  "nvcc": "$("$(setting CUDAToolkit_NVCC_EXECUTABLE)" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')",
  "cpu_flags": "$(cpu_flags)",
  "executables": "${executables[*]}",
  "files": {
$files
  }
}
EOF
bash "$root/tests/gpu/check_bundle.sh" "$dir"
say "bundle ready: $dir ($(du -sb "$dir" | cut -f1) bytes); on the GPU machine: bash $dir/run.sh"
