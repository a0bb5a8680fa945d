#!/usr/bin/env bash
# Fuzzes the loaders of outside files for longer than CI does (tests/fuzz: libFuzzer, clang,
# ASan + UBSan): builds the fuzz preset, writes the seed corpora, then runs each harness for
# SECONDS (default 300) one after another, keeping each corpus in build/fuzz/runs/<name>
# so that a later run continues where this one stopped. One line per harness
#   fuzz NAME: EXECS executions, CRASHES crashes, CORPUS inputs in the corpus (S s)
# and, with --json FILE, one JSON object per line. Exits non-zero if any harness found a crash
# (its input is in build/fuzz/runs/<name>/artifacts).
#   tools/fuzz.sh [--seconds S] [--only NAME] [--json FILE]
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=300 only="" json=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=${2-}; shift 2 ;;
    --only) only=${2-}; shift 2 ;;
    --json) json=${2-}; shift 2 ;;
    *) echo "usage: $0 [--seconds S] [--only NAME] [--json FILE]" >&2; exit 2 ;;
  esac
done
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --seconds = '$seconds'; accepted: an integer >= 1" >&2; exit 2; }
cmake --preset fuzz >/dev/null && cmake --build --preset fuzz -j"$(nproc)" >/dev/null || {
  echo "fuzz.sh: the fuzz preset did not build (needs clang and libclang-rt-14-dev: bash tools/install-deps.sh)" >&2
  exit 1
}
bin=build/fuzz/tests/fuzz
"$bin/fuzz_seeds" "$bin/seeds" >/dev/null || exit 1
[ -n "$json" ] && : >"$json"
found=0 ran=0
for src in tests/fuzz/fuzz_*.cc; do
  name=$(basename "$src" .cc); name=${name#fuzz_}
  [ "$name" = seeds ] && continue
  [ -n "$only" ] && [ "$only" != "$name" ] && continue
  ran=$((ran + 1))
  one_json=$(mktemp)
  bash tests/fuzz/run_fuzzer.sh "$bin/fuzz_$name" "$bin/seeds/$name" "$bin/runs/$name" "$seconds" --json "$one_json" ||
    found=1
  [ -n "$json" ] && cat "$one_json" >>"$json"
  rm -f "$one_json"
done
[ "$ran" -gt 0 ] || { echo "fuzz.sh: --only '$only' names no harness (tests/fuzz/fuzz_<name>.cc)" >&2; exit 2; }
exit $found
