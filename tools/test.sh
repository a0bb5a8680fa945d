#!/usr/bin/env bash
# Builds and runs every test: the Release build first, then the whole suite again under
# AddressSanitizer + UndefinedBehaviorSanitizer, and under ThreadSanitizer (the collectives
# are threads sharing memory). Exits non-zero on any failure.
# The sanitizer builds compile at -O1 -g1 (line tables are all a sanitizer report needs):
# less than half the compile time of -O2 -g on 2 cores, with the same checks. They build
# without CUDA (DTRAIN_WITH_CUDA=OFF): sanitizers do not instrument nvcc's device code, and
# so CI also builds and tests the CPU-only configuration, while the Release pass builds the
# CUDA kernels (wherever nvcc is) and runs the GPU tests, which skip without a GPU.
# DTRAIN_TEST_SKIP_SANITIZERS=1 skips both sanitizer passes (quicker local runs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
jobs=$(nproc)
export CTEST_OUTPUT_ON_FAILURE=1

run_preset() {
  local preset=$1
  echo "== [$preset] configure"
  cmake --preset "$preset" >/dev/null
  echo "== [$preset] build"
  cmake --build --preset "$preset" -j"$jobs"
  echo "== [$preset] test"
  ctest --preset "$preset" -j"$jobs" --timeout 300
}

start=$(date +%s)
run_preset default
if [ "${DTRAIN_TEST_SKIP_SANITIZERS:-0}" != "1" ]; then
  run_preset asan
  run_preset tsan
fi
echo "== all tests passed in $(( $(date +%s) - start )) s"
