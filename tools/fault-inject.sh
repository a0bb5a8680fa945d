#!/usr/bin/env bash
# Fault injection for `dtrain train --backend mpi`: N runs of mpirun -np 2|3 in which one
# random rank is killed (SIGKILL) or stopped (SIGSTOP) at a random moment of training.
# A run passes when the whole job (mpirun and every rank) has ended within --timeout + 5 s
# of the fault, and some output names the rank that was hit. Progress goes to stdout, one
# line per run; --json FILE also writes the figures (runs, hangs, exit times) as JSON.
#
#   tools/fault-inject.sh [--runs N] [--timeout S] [--dtrain PATH] [--np 2|3|mixed]
#                         [--faults kill,stop] [--window MIN:MAX] [--json FILE] [--keep DIR] [--seed N]
#
# --window: the fault comes MIN to MAX ms after launch (default 300:2800: start-up or training).
#
# Exit status: 0 when no run hung and every fault was named, 1 otherwise, 2 on bad usage.
set -u

runs=100 timeout=5 np_mode=mixed faults=kill,stop json="" keep="" seed="" win_min=300 win_max=2800
dtrain="$(dirname "$0")/../build/default/dtrain"
usage() { echo "usage: $0 [--runs N] [--timeout S] [--dtrain PATH] [--np 2|3|mixed] [--faults kill,stop] [--window MIN:MAX] [--json FILE] [--keep DIR] [--seed N]" >&2; exit 2; }
need_int() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "fault-inject.sh: $1 = '$2'; accepted: an integer >= 1" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) need_int "$1" "${2-}"; runs=$2; shift 2 ;;
    --timeout) need_int "$1" "${2-}"; timeout=$2; shift 2 ;;
    --dtrain) dtrain=${2-}; shift 2 ;;
    --np) case "${2-}" in 2|3|mixed) np_mode=$2 ;; *) echo "fault-inject.sh: --np = '${2-}'; accepted: 2, 3, mixed" >&2; exit 2 ;; esac; shift 2 ;;
    --faults) case "${2-}" in kill|stop|kill,stop|stop,kill) faults=$2 ;; *) echo "fault-inject.sh: --faults = '${2-}'; accepted: kill, stop, kill,stop" >&2; exit 2 ;; esac; shift 2 ;;
    --window) [[ "${2-}" =~ ^([0-9]+):([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ] ||
                { echo "fault-inject.sh: --window = '${2-}'; accepted: MIN:MAX in ms, MIN <= MAX" >&2; exit 2; }
              win_min=${BASH_REMATCH[1]}; win_max=${BASH_REMATCH[2]}; shift 2 ;;
    --json) json=${2-}; shift 2 ;;
    --keep) keep=${2-}; shift 2 ;;
    --seed) need_int "$1" "${2-}"; seed=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) usage ;;
  esac
done
[ -x "$dtrain" ] || { echo "fault-inject.sh: --dtrain '$dtrain' is not an executable; build dtrain_cli or pass --dtrain PATH" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "fault-inject.sh: mpirun not found (Open MPI)" >&2; exit 2; }
[ -n "$seed" ] && RANDOM=$seed
IFS=, read -r -a fault_kinds <<<"$faults"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader,tcp
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
limit=$((timeout + 5))

# The process of rank $1 under mpirun $2 (mpirun forks the ranks itself on one host).
rank_pid() {
  local p
  for p in $(pgrep -P "$2"); do
    if tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -x >/dev/null "OMPI_COMM_WORLD_RANK=$1"; then echo "$p"; return; fi
  done
}

now() { date +%s.%N; }
hangs=0 unnamed=0 skipped=0 histories=0 times=() records=()
for ((run = 1; run <= runs; run++)); do
  if [ "$np_mode" = mixed ]; then np=$((2 + RANDOM % 2)); else np=$np_mode; fi
  victim=$((RANDOM % np))
  fault=${fault_kinds[$((RANDOM % ${#fault_kinds[@]}))]}
  delay_ms=$((win_min + RANDOM % (win_max - win_min + 1)))
  out="$work/run$run"
  mkdir -p "$out"
  mpirun -np "$np" --oversubscribe "$dtrain" train --backend mpi --timeout "$timeout" --data addition --digits 2 \
    --layers 1 --d-model 32 --heads 2 --steps 100000 --batch 12 --no-progress --threads 1 --report --out "$out/run" \
    >"$out/log" 2>&1 &
  mpi_pid=$!
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  pid=$(rank_pid "$victim" "$mpi_pid")
  if [ -z "$pid" ]; then  # not started yet, or already gone: count the run as skipped
    kill -KILL "$mpi_pid" 2>/dev/null; wait "$mpi_pid" 2>/dev/null
    echo "run $run: np=$np rank $victim not found at ${delay_ms} ms (not started, or the job already ended); redone"
    ((skipped++)); ((run--))
    # A dtrain that fails before any fault (bad flags, a build that cannot run) would loop here.
    if [ "$skipped" -gt $((runs + 10)) ]; then echo "fault-inject.sh: $skipped runs ended before their fault; giving up (see a run's log with --keep)" >&2; exit 2; fi
    continue
  fi
  if [ "$fault" = kill ]; then kill -KILL "$pid"; else kill -STOP "$pid"; fi
  t_fault=$(now)
  ended=0
  while kill -0 "$mpi_pid" 2>/dev/null; do
    if awk -v a="$(now)" -v b="$t_fault" -v l="$limit" 'BEGIN { exit !(a - b > l) }'; then break; fi
    sleep 0.05
  done
  if ! kill -0 "$mpi_pid" 2>/dev/null; then ended=1; fi
  wait_s=$(awk -v a="$(now)" -v b="$t_fault" 'BEGIN { printf "%.2f", a - b }')
  # Any rank still alive (the job hung): end it, then look at what it printed.
  leftovers=$(pgrep -P "$mpi_pid" | wc -l)
  if [ "$ended" = 0 ] || [ "$leftovers" != 0 ]; then
    ended=0
    for p in $(pgrep -P "$mpi_pid"); do kill -KILL "$p" 2>/dev/null; done
    kill -KILL "$mpi_pid" 2>/dev/null
  fi
  wait "$mpi_pid" 2>/dev/null
  rc=$?
  # Named: the library's timeout message lists it ("rank(s) [1] did not arrive", "rank(s) 1
  # did not answer"), or mpirun reports its death ("process rank 1 ... exited on signal 9").
  named=0
  if grep -Eq "rank\(s\) (\[[0-9, ]*\b$victim\b|[0-9, ]*\b$victim\b[0-9, ]* did not answer)|process rank $victim .*(signal|exited)" "$out/log"; then named=1; fi
  # --report: a surviving rank whose step failed writes its last collectives (FailureReport).
  history=no
  if compgen -G "$out/run/comm_history.rank*.json" >/dev/null; then history=yes; ((histories++)); fi
  [ "$ended" = 1 ] || ((hangs++))
  [ "$named" = 1 ] || ((unnamed++))
  [ "$ended" = 1 ] && times+=("$wait_s")
  line=$(grep -Eo 'dtrain: error: .{0,200}|process rank [0-9]+ .{0,60}' "$out/log" | head -1)
  printf 'run %d: np=%d %s rank %d at %d ms -> %s in %s s, rc=%d, named=%s, history=%s | %s\n' "$run" "$np" "$fault" "$victim" \
    "$delay_ms" "$([ "$ended" = 1 ] && echo ended || echo HUNG)" "$wait_s" "$rc" "$([ "$named" = 1 ] && echo yes || echo no)" "$history" "$line"
  records+=("{\"run\":$run,\"np\":$np,\"fault\":\"$fault\",\"rank\":$victim,\"delay_ms\":$delay_ms,\"ended\":$([ "$ended" = 1 ] && echo true || echo false),\"seconds\":$wait_s,\"exit_status\":$rc,\"named\":$([ "$named" = 1 ] && echo true || echo false),\"history_written\":$([ "$history" = yes ] && echo true || echo false)}")
  if [ -n "$keep" ]; then mkdir -p "$keep"; cp "$out/log" "$keep/run$run.log"; fi
  rm -rf "$out"
done

stats=$(printf '%s\n' "${times[@]:-}" | grep . | sort -g | awk '{ v[NR] = $1 } END {
  if (NR == 0) { print "null null"; exit }
  m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f %.2f\n", v[NR], m }')
read -r max_s median_s <<<"$stats"
echo "summary: $runs runs, $hangs hangs (not ended within timeout + 5 = $limit s), $unnamed without the rank named;" \
     "time to exit after the fault: max $max_s s, median $median_s s (timeout $timeout s); $skipped redone (rank not found);" \
     "$histories wrote a comm history (--report)"
if [ -n "$json" ]; then
  { printf '{"runs":%d,"timeout_s":%d,"limit_s":%d,"hangs":%d,"unnamed":%d,"redone":%d,"histories_written":%d,"max_exit_s":%s,"median_exit_s":%s,"records":[' \
      "$runs" "$timeout" "$limit" "$hangs" "$unnamed" "$skipped" "$histories" "$max_s" "$median_s"
    (IFS=,; printf '%s' "${records[*]}")
    printf ']}\n'; } >"$json"
fi
[ "$hangs" = 0 ] && [ "$unnamed" = 0 ]
