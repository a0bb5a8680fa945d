#!/usr/bin/env bash
# Link cut between two "hosts": network namespaces dtA and dtB joined by a veth pair, with
# `mpirun` in dtA starting one rank in each (its rsh agent enters dtB instead of ssh) over
# TCP. Mid-training the link goes down; the script reports when the ranks on each host,
# mpirun, and every process of each host ended. Needs root (ip netns).
#
#   tools/link-cut.sh [--timeout S] [--dtrain PATH] [--runs N] [--no-keepalive]
#
# mpirun is launched as a multi-host job should be (docs/reliability.md): with Open MPI's
# TCP keepalive on its out-of-band channel at 5 s idle and 3 probes 1 s apart, so mpirun
# and the remote orted notice a lost peer within about 8 s and end the job, whichever comes
# first: that or dtrain's --timeout. --no-keepalive shows Open MPI's default: with the ranks
# gone (after --timeout), mpirun and the remote orted still wait for each other for
# 300 s + 9 x 20 s. (Measured on Open MPI 4.1.4: keepalive, --timeout 3: ranks 3.8 s, all
# 4.8 s; keepalive, --timeout 20: all 6.6 s; no keepalive, --timeout 3: ranks 3.8 s,
# mpirun and orted NEVER within 33 s.)
set -u
timeout=5 runs=1
keepalive=(--mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3)
extra=("${keepalive[@]}")
dtrain="$(dirname "$0")/../build/default/dtrain"
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) timeout=${2-}; shift 2 ;;
    --dtrain) dtrain=${2-}; shift 2 ;;
    --runs) runs=${2-}; shift 2 ;;
    --keepalive) extra=("${keepalive[@]}"); shift ;;  # the default; kept for old command lines
    --no-keepalive) extra=(); shift ;;
    *) echo "usage: $0 [--timeout S] [--dtrain PATH] [--runs N] [--no-keepalive]" >&2; exit 2 ;;
  esac
done
[[ "$timeout" =~ ^[1-9][0-9]*$ ]] || { echo "link-cut.sh: --timeout = '$timeout'; accepted: an integer >= 1" >&2; exit 2; }
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "link-cut.sh: --runs = '$runs'; accepted: an integer >= 1" >&2; exit 2; }
[ -x "$dtrain" ] || { echo "link-cut.sh: --dtrain '$dtrain' is not an executable" >&2; exit 2; }
dtrain=$(readlink -f "$dtrain")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# shellcheck source=tools/netns-hosts.sh
. "$(dirname "$0")/netns-hosts.sh"
work=$(mktemp -d)
cleanup() { netns_hosts_down; rm -rf "$work"; }
trap cleanup EXIT
netns_hosts_up "$work" || { echo "link-cut.sh: making the namespaces failed (needs root and network namespaces)" >&2; exit 2; }

now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }
ranks_in() { ip netns pids "$1" | xargs -r ps -o comm= -p 2>/dev/null | grep -c dtrain; }
limit=$((timeout + 30))
for ((run = 1; run <= runs; run++)); do
  ip -n dtA link set vethA up; ip -n dtB link set vethB up
  ip netns exec dtA mpirun --host 10.16.0.1:1,10.16.0.2:1 -np 2 --mca plm_rsh_agent "$work/agent" \
    --mca btl self,tcp --mca btl_tcp_if_include 10.16.0.0/24 --mca oob_tcp_if_include 10.16.0.0/24 "${extra[@]}" \
    -x OPENBLAS_NUM_THREADS=1 "$dtrain" train --backend mpi --timeout "$timeout" --data addition --digits 2 \
    --layers 1 --d-model 32 --heads 2 --steps 1000000 --batch 12 --no-progress --threads 1 --out "$work/run" \
    >"$work/log" 2>&1 &
  mpi_pid=$!
  sleep 4  # training by now
  ip -n dtB link set vethB down
  t0=$(now)
  ranks_a="" ranks_b="" end_mpirun="" end_a="" end_b=""
  while :; do
    t=$(since "$t0")
    [ -z "$ranks_a" ] && [ "$(ranks_in dtA)" = 0 ] && ranks_a=$t
    [ -z "$ranks_b" ] && [ "$(ranks_in dtB)" = 0 ] && ranks_b=$t
    [ -z "$end_mpirun" ] && ! kill -0 "$mpi_pid" 2>/dev/null && end_mpirun=$t
    [ -z "$end_a" ] && [ -z "$(ip netns pids dtA)" ] && end_a=$t
    [ -z "$end_b" ] && [ -z "$(ip netns pids dtB)" ] && end_b=$t
    [ -n "$end_a" ] && [ -n "$end_b" ] && break
    awk -v t="$t" -v l="$limit" 'BEGIN { exit !(t > l) }' && break
    sleep 0.1
  done
  left="$(ip netns pids dtA | xargs -r ps -o comm= -p | tr '\n' ' ')/ $(ip netns pids dtB | xargs -r ps -o comm= -p | tr '\n' ' ')"
  echo "run $run: link cut; ranks ended after ${ranks_a:-NEVER} s (host A) and ${ranks_b:-NEVER} s (host B);" \
       "mpirun after ${end_mpirun:-NEVER} s; all of host A after ${end_a:-NEVER} s, host B after ${end_b:-NEVER} s" \
       "(timeout $timeout s, watched $limit s; left: $left)"
  grep -Eo 'dtrain: error: .{0,220}' "$work/log" | head -1
  for ns in dtA dtB; do for p in $(ip netns pids $ns); do kill -KILL "$p" 2>/dev/null; done; done
  wait "$mpi_pid" 2>/dev/null
done
