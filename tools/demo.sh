#!/usr/bin/env bash
# The main job: builds libdtrain and its command line (Release), then trains a small GPT on
# 3-digit addition with `dtrain train` (progress bar, metrics, loss curve, checkpoint), and
# prints held-out problems with the model's answers and the exact-match accuracy.
# The run lands in runs/addition; the build in build/demo.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
# Only the demo's packages (the test toolchains are tools/test.sh's business).
bash tools/install-deps.sh --demo
echo "== configure and build the library and the dtrain command line (Release, build/demo)"
# Its own build folder, without tests (GoogleTest), benchmarks, MPI or CUDA: the demo trains
# on the CPU in one process, and so configures with the demo's packages alone and compiles
# nothing it does not run. build/default stays the full build tools/test.sh configures.
cmake -S . -B build/demo -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DDTRAIN_BUILD_BENCH=OFF \
  -DDTRAIN_WITH_MPI=OFF -DDTRAIN_WITH_CUDA=OFF >/dev/null
cmake --build build/demo -j"$(nproc)" --target dtrain_cli
built=$(date +%s)
echo "== dtrain train: a 2-layer GPT (width 128) learns 3-digit addition"
./build/demo/dtrain train --data addition --digits 3 --layers 2 --d-model 128 --heads 4 \
  --steps 2000 --batch 64 --lr 3e-3 --out runs/addition --json runs/addition/summary.json "$@"
echo "== dtrain generate: the trained model answers a sum of its own"
./build/demo/dtrain generate --checkpoint runs/addition/ckpt --prompt "358+267=" --max-new-tokens 5
end=$(date +%s)
echo "== demo done in $((end - start)) s: packages and build $((built - start)) s, training and generation $((end - built)) s"
echo "   (figures: runs/addition/summary.json; curve: runs/addition/loss.svg)"
