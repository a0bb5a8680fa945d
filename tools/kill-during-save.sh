#!/usr/bin/env bash
# Kills `dtrain train --save-every 1` (SIGKILL) at random moments and checks what a crash
# mid-save leaves: the checkpoint found afterwards must load, training resumed from it must
# end bitwise equal to a run that was never interrupted (so that checkpoint held exactly
# the state of its step, never a torn mix), and after the resumed run's saves no temporary
# file or older generation may be left in the directory.
#
#   tools/kill-during-save.sh [--runs N] [--steps S] [--dtrain PATH] [--seed N] [--json FILE] [--keep DIR]
#                             [--layout "FLAGS"]
#
# --layout trains on a mesh in the one process ("--dp 2 --zero 2", "--tp 2 --pp 2"): every
# save is then sharded, each rank writing its own file, and every file of the final
# checkpoint must equal the uninterrupted run's.
#
# One line per run (the step it was killed at, the temporary files the kill left, what
# resuming made of them) and a summary; --json writes the figures. Exit status: 0 when every
# run passed, 1 otherwise, 2 on bad usage. ctest runs 3 runs (kill_during_save_ci).
set -u
runs=100 steps=150 seed="" json="" keep="" layout=""
dtrain="$(dirname "$0")/../build/default/dtrain"
usage() { echo "usage: $0 [--runs N] [--steps S] [--dtrain PATH] [--seed N] [--json FILE] [--keep DIR] [--layout FLAGS]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=${2-}; shift 2 ;;
    --steps) steps=${2-}; shift 2 ;;
    --dtrain) dtrain=${2-}; shift 2 ;;
    --seed) seed=${2-}; shift 2 ;;
    --json) json=${2-}; shift 2 ;;
    --keep) keep=${2-}; shift 2 ;;
    --layout) layout=${2-}; shift 2 ;;
    *) usage ;;
  esac
done
for pair in "runs:$runs" "steps:$steps"; do
  [[ "${pair#*:}" =~ ^[1-9][0-9]*$ ]] || { echo "kill-during-save.sh: --${pair%%:*} = '${pair#*:}'; accepted: an integer >= 1" >&2; exit 2; }
done
[ -z "$seed" ] || [[ "$seed" =~ ^[0-9]+$ ]] || { echo "kill-during-save.sh: --seed = '$seed'; accepted: an integer >= 0" >&2; exit 2; }
[ -x "$dtrain" ] || { echo "kill-during-save.sh: --dtrain '$dtrain' is not an executable" >&2; exit 2; }
dtrain=$(readlink -f "$dtrain")
[ -z "$json" ] || json=$(realpath -m "$json")
[ -z "$keep" ] || keep=$(realpath -m "$keep")
[ -n "$seed" ] && RANDOM=$seed
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
# The small model of the command line's tests: fast steps, so that saves are most of the time.
TRAIN=(train --data addition --digits 2 --layers 1 --d-model 32 --heads 2 --batch 16 --no-progress --threads 1
       --eval-problems 0 --steps "$steps" --save-every 1)
# shellcheck disable=SC2206  # the layout's flags, split on spaces
TRAIN+=($layout)

ms() { date +%s%3N; }
t0=$(ms)
"$dtrain" "${TRAIN[@]}" --out ref >ref.log 2>&1 || { cat ref.log; echo "kill-during-save.sh: the reference run failed" >&2; exit 1; }
ref_ms=$(( $(ms) - t0 ))
echo "reference: $steps steps saved every step${layout:+ on $layout} in $ref_ms ms; kills fall in 100 to $(( ref_ms * 9 / 10 )) ms"

temp_count() { find "$1" -maxdepth 1 -name '*.tmp.*' | wc -l; }
writers=$(ls ref/ckpt.*.safetensors | wc -l)  # one per rank of a sharded save
# Every data file of the final checkpoint, and its index's chunk tables, as the reference's.
same_files() {
  for f in ref/ckpt.*.safetensors; do cmp -s "$f" "run/${f#ref/}" || return 1; done
  [ "$(grep -v '"train_seconds\|seconds"' ref/ckpt.index.json | md5sum)" = "$(grep -v '"train_seconds\|seconds"' run/ckpt.index.json | md5sum)" ]
}
passed=0 failed=0 redone=0 left_by_kills=0 i=0
kill_steps=()
while [ $i -lt "$runs" ]; do
  rm -rf run run.log resume.log
  "$dtrain" "${TRAIN[@]}" --out run >run.log 2>&1 &
  pid=$!
  at=$(( 100 + (RANDOM * 32768 + RANDOM) % (ref_ms * 9 / 10 > 101 ? ref_ms * 9 / 10 - 100 : 1) ))
  sleep "$(printf '%d.%03d' $((at / 1000)) $((at % 1000)))"
  if ! kill -9 "$pid" 2>/dev/null; then wait "$pid"; redone=$((redone + 1)); continue; fi
  wait "$pid" 2>/dev/null
  if [ ! -f run/ckpt.index.json ]; then redone=$((redone + 1)); continue; fi  # killed before its first save
  if [ "$redone" -gt $((runs * 5 + 20)) ]; then echo "kill-during-save.sh: too many runs ended before their kill; giving up" >&2; exit 1; fi
  i=$((i + 1))
  step=$(grep -o '"step": *[0-9]*' run/ckpt.index.json | grep -o '[0-9]*$')
  temps=$(temp_count run)
  left_by_kills=$((left_by_kills + (temps > 0 ? 1 : 0)))
  problem=""
  if ! "$dtrain" "${TRAIN[@]}" --out run --resume >resume.log 2>&1; then
    problem="the checkpoint of step $step did not resume: $(grep -m1 -i error resume.log)"
  elif ! same_files; then
    problem="resumed from step $step, the final checkpoint differs from the uninterrupted run's"
  elif [ "$(temp_count run)" -ne 0 ] || [ "$(ls run/ckpt.*.safetensors | wc -l)" -ne "$writers" ]; then
    problem="after the resumed run's saves: $(ls run | tr '\n' ' ')"
  fi
  kill_steps+=("$step")
  if [ -z "$problem" ]; then
    passed=$((passed + 1))
    echo "run $i: killed at $at ms (checkpoint of step $step; temporary files left: $temps) -> resumed, bitwise equal, directory clean"
  else
    failed=$((failed + 1))
    echo "run $i: killed at $at ms (checkpoint of step $step; temporary files left: $temps) -> FAILED: $problem"
    if [ -n "$keep" ]; then mkdir -p "$keep" && cp -r run "$keep/run$i" && cp run.log resume.log "$keep/run$i/"; fi
  fi
done
echo "summary: $runs runs killed mid-training with a save every step, $passed passed, $failed torn or unresumable;" \
     "$left_by_kills kills left temporary files, all removed by the next save; $redone redone (ended before the kill or before the first save)"
if [ -n "$json" ]; then
  printf '{"runs":%d,"passed":%d,"failed":%d,"kills_that_left_temp_files":%d,"redone":%d,"steps":%d,"reference_ms":%d,"kill_steps":[%s]}\n' \
    "$runs" "$passed" "$failed" "$left_by_kills" "$redone" "$steps" "$ref_ms" "$(IFS=,; echo "${kill_steps[*]}")" >"$json"
fi
[ "$failed" -eq 0 ]
