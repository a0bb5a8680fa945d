#!/usr/bin/env bash
# Runs a sample with the checkpoint stem WORK/sample-ckpt/gpt and keeps its stdout in
# WORK/sample.out for same_losses.sh. Usage: run_sample.sh WORK COMMAND [ARGS...]
set -euo pipefail
work=$1
shift
rm -rf "$work" && mkdir -p "$work"
"$@" "$work/sample-ckpt/gpt" | tee "$work/sample.out"
bash "$(dirname "$0")/check_sample.sh" "$work/sample.out" "$work/sample-ckpt/gpt"
echo "sample passed"
