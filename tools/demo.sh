#!/usr/bin/env bash
# The main job: builds libdtrain and its command line (Release), then trains a small GPT on
# 3-digit addition with `dtrain train` (progress bar, metrics, loss curve, checkpoint), and
# prints held-out problems with the model's answers and the exact-match accuracy.
# About a minute of training on 2 cores; the run lands in runs/addition.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
echo "== configure and build (Release)"
cmake --preset default >/dev/null
cmake --build --preset default -j"$(nproc)" --target dtrain_cli
start=$(date +%s)
echo "== dtrain train: a 2-layer GPT (width 128) learns 3-digit addition"
./build/default/dtrain train --data addition --digits 3 --layers 2 --d-model 128 --heads 4 \
  --steps 2000 --batch 64 --lr 3e-3 --out runs/addition --json runs/addition/summary.json "$@"
echo "== dtrain generate: the trained model answers a sum of its own"
./build/default/dtrain generate --checkpoint runs/addition/ckpt --prompt "358+267=" --max-new-tokens 5
echo "== demo done in $(( $(date +%s) - start )) s (figures: runs/addition/summary.json; curve: runs/addition/loss.svg)"
