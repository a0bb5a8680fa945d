#!/usr/bin/env bash
# Runs one libFuzzer harness for SECONDS from the seed corpus and prints one line:
#   fuzz NAME: EXECS executions, CRASHES crashes, CORPUS inputs in the corpus (S s)
# (with --json FILE also as JSON). A crash, leak, timeout or allocation over the limits leaves
# its input in WORK/artifacts and the line says so; the exit status is non-zero then.
#   run_fuzzer.sh FUZZER SEEDS WORK SECONDS [--json FILE]
set -uo pipefail
if [[ $# -ne 4 && $# -ne 6 ]]; then
  echo "usage: $0 FUZZER SEEDS WORK SECONDS [--json FILE]" >&2
  exit 2
fi
fuzzer=$1 seeds=$2 work=$3 seconds=$4 json=${6:-}
name=$(basename "$fuzzer"); name=${name#fuzz_}
mkdir -p "$work/corpus" "$work/artifacts"
# Only this run's findings count (an earlier run's stay in artifacts/ for whoever reads them).
stamp="$work/started"
: >"$stamp"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
start=$(date +%s)
# -rss_limit_mb / -malloc_limit_mb: a hostile input that makes a loader allocate without
# bound is a finding, not a slow run. New inputs go to corpus/; the seeds are only read.
"$fuzzer" "$work/corpus" "$seeds" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 \
  -timeout=10 -print_final_stats=1 -artifact_prefix="$work/artifacts/" >"$work/log" 2>&1
rc=$?
execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$work/log" | grep -oE '[0-9]+$' | tail -1)
crashes=$(find "$work/artifacts" -type f -newer "$stamp" | wc -l)
corpus=$(find "$work/corpus" -type f | wc -l)
elapsed=$(( $(date +%s) - start ))
if [[ $rc -ne 0 && $crashes -eq 0 ]]; then crashes=1; fi
echo "fuzz $name: ${execs:-0} executions, $crashes crashes, $corpus inputs in the corpus (${elapsed} s)"
if [[ -n $json ]]; then
  printf '{"fuzzer":"%s","executions":%s,"crashes":%s,"corpus":%s,"seconds":%s}\n' \
    "$name" "${execs:-0}" "$crashes" "$corpus" "$elapsed" >"$json"
fi
if [[ $crashes -ne 0 ]]; then
  tail -60 "$work/log"
  find "$work/artifacts" -type f -newer "$stamp"
  exit 1
fi
