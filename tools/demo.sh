#!/usr/bin/env bash
# The main job: builds libdtrain (Release) and runs the tour sample, which exercises
# tensors, the RNG, the kernels and the memory ledger through the public C API.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
echo "== configure and build (Release)"
cmake --preset default >/dev/null
cmake --build --preset default -j"$(nproc)" --target dtrain_tour
echo "== run samples/c/tour.c"
./build/default/dtrain_tour
