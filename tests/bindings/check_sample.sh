#!/usr/bin/env bash
# What every sample must have printed and written, in every language and under mpirun:
# 30 `step N loss X` lines (X with 8 decimals), `saved STEM`, a `123+456=...` line, and
# the checkpoint's index at STEM.index.json. Usage: check_sample.sh OUT STEM
set -euo pipefail
out=$1 stem=$2
fail() { echo "FAIL: the sample's output $out: $1" >&2; exit 1; }
steps=$(grep -c '^step ' "$out" || true)
good=$(grep -cE '^step [0-9]+ loss [0-9]+\.[0-9]{8}$' "$out" || true)
[ "$steps" = 30 ] && [ "$good" = 30 ] || fail "$steps step lines, $good of them 'step N loss X.XXXXXXXX'; expected 30"
grep -qx "saved $stem" "$out" || fail "no line 'saved $stem'"
grep -q '^123+456=' "$out" || fail "no generation line '123+456=...'"
[ -f "$stem.index.json" ] || fail "no checkpoint index $stem.index.json"
