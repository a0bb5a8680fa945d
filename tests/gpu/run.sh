#!/usr/bin/env bash
# The GPU check on a machine that has both a GPU and this project's build dependencies (a
# workstation): builds the GPU bundle here, then runs it, exactly as the lent GPU machine
# runs a bundle carried to it (docs/gpu.md). Arguments go to the bundle's run.sh.
#   bash tests/gpu/run.sh [--quick] [--budget SECONDS]
# Results: gpu_check.json and the logs in $OUT, or build/gpu-bundle-out/out.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bash "$root/tests/gpu/bundle.sh" "$root/build/gpu-bundle-out"
exec bash "$root/build/gpu-bundle-out/run.sh" "$@"
