#!/usr/bin/env bash
# Builds and runs every test: the Release build first, then again under AddressSanitizer +
# UndefinedBehaviorSanitizer, with a short fuzzing pass over the loaders of outside files
# (clang's libFuzzer, built in the same tree), and under ThreadSanitizer (the collectives are
# threads sharing memory). Exits non-zero on any failure. docs/testing.md describes each pass.
# The sanitizer builds use clang (about 1.5x quicker to compile than GCC, and libFuzzer's
# compiler) at -O1 -g1 (line tables are all a sanitizer report needs). They build without
# CUDA (DTRAIN_WITH_CUDA=OFF): sanitizers do not instrument nvcc's device code, and so CI
# also builds and tests the CPU-only configuration, while the Release pass builds the CUDA
# kernels (wherever nvcc is) and runs the GPU tests, which skip without a GPU.
# Each sanitizer pass runs the tests its sanitizer can tell something about
# (DTRAIN_TEST_SCOPE in CMakePresets.json, regexes in tests/CMakeLists.txt): ASan+UBSan runs
# all but the long end-to-end training runs that repeat the Release pass with more ranks;
# TSan runs the tests where threads share memory (thread pool, collectives, mesh, DDP,
# ZeRO, the threaded C API, MPI). Every test still runs in full in the Release pass.
# Each pass also covers one CPU GEMM backend (CMakePresets.json): Release oneDNN (the
# default), ASan OpenBLAS, TSan BLIS.
# DTRAIN_TEST_SKIP_SANITIZERS=1 skips the sanitizer passes (quicker local runs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
jobs=$(nproc)
export CTEST_OUTPUT_ON_FAILURE=1

run_preset() {
  local preset=$1
  shift
  echo "== [$preset] configure"
  # Unity batches: each file is compiled once here, so batching saves CPU and costs nothing.
  cmake --preset "$preset" -DDTRAIN_UNITY_BUILD=ON "$@" >/dev/null
  echo "== [$preset] build"
  local t0=$(date +%s)
  cmake --build --preset "$preset" -j"$((jobs + 1))"  # one more: a job waiting on I/O or the linker
  local t1=$(date +%s)
  echo "== [$preset] test"
  ctest --preset "$preset" -j"$jobs" --timeout 300
  echo "== [$preset] passed: build $((t1 - t0)) s, tests $(( $(date +%s) - t1 )) s"
}

start=$(date +%s)
# Every binding's toolchain is installed above, so a missing one is an error, not a skip;
# warnings are errors in the Release pass (GCC at -O1 under the sanitizers warns differently).
run_preset default -DDTRAIN_REQUIRE_BINDINGS=ON -DDTRAIN_WERROR=ON -DDTRAIN_TEST_BUNDLES=ON
if [ "${DTRAIN_TEST_SKIP_SANITIZERS:-0}" != "1" ]; then
  run_preset asan
  run_preset tsan
fi
echo "== all tests passed in $(( $(date +%s) - start )) s"
