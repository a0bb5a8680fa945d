#!/usr/bin/env bash
# generate.sh STAGE [OUTDIR]: (re)generates the raw package cdt with SWIG from the one
# interface, bindings/swig/dtrain.i, against the header installed under STAGE.
# OUTDIR defaults to bindings/go/internal/cdt (the committed copy); test.sh generates
# into a scratch folder and compares, so the committed files cannot drift from the header.
set -euo pipefail
stage=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${2:-$root/bindings/go/internal/cdt}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$root"   # run from the root so the paths SWIG records are the same everywhere
swig -go -cgo -intgosize 64 -I"$stage/include" -outdir "$out" -o "$out/dtrain_wrap.c" \
  bindings/swig/dtrain.i
