#!/usr/bin/env bash
# A job that moves between hosts: two "hosts" (network namespaces dtA and dtB joined by a
# veth pair, as tools/link-cut.sh makes them; mpirun in dtA starts the rank in dtB through
# an rsh agent, over TCP) and one shared run directory. Three runs of `dtrain train` on one
# schedule: steps 1-10 on both hosts (np 2, ZeRO-1: each process writes its own shard file),
# 11-15 on host A alone (np 1: it reads both shards), 16-20 on both again (np 2, DDP). The
# final loss must equal one uninterrupted process's. Needs root and network namespaces;
# without them it says so and exits 77 (ctest: skipped).
#
#   tools/two-hosts-resume.sh [--dtrain PATH]
set -u
dtrain="$(dirname "$0")/../build/default/dtrain"
[ "${1-}" = "--dtrain" ] && dtrain=${2-}
[ -x "$dtrain" ] || { echo "two-hosts-resume.sh: --dtrain '$dtrain' is not an executable" >&2; exit 2; }
dtrain=$(readlink -f "$dtrain")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
# shellcheck source=tools/netns-hosts.sh
. "$(dirname "$0")/netns-hosts.sh"
work=$(mktemp -d)
cleanup() { netns_hosts_down; rm -rf "$work"; }
trap cleanup EXIT
if ! netns_hosts_up "$work"; then
  echo "two-hosts-resume.sh: skipped: no network namespaces here (needs root, iproute2 and netns support)"
  exit 77
fi
ip -n dtA link set vethA up; ip -n dtB link set vethB up
TRAIN=(train --data addition --digits 2 --layers 1 --d-model 32 --heads 2 --batch 16 --no-progress --threads 1
       --eval-problems 0 --steps 20 --out "$work/run")
both() {
  ip netns exec dtA mpirun --host 10.16.0.1:1,10.16.0.2:1 -np 2 --mca plm_rsh_agent "$work/agent" \
    --mca btl self,tcp --mca btl_tcp_if_include 10.16.0.0/24 --mca oob_tcp_if_include 10.16.0.0/24 \
    -x OPENBLAS_CORETYPE -x OPENBLAS_NUM_THREADS=1 "$dtrain" "${TRAIN[@]}" --backend mpi "$@"
}
"$dtrain" train --data addition --digits 2 --layers 1 --d-model 32 --heads 2 --batch 16 --no-progress --threads 1 \
  --eval-problems 0 --steps 20 --out "$work/one" --json "$work/one.json" >"$work/one.log" 2>&1 ||
  { cat "$work/one.log"; echo "two-hosts-resume.sh: the one-process run failed" >&2; exit 1; }
both --zero 1 --stop-at 10 >"$work/1.log" 2>&1 || { cat "$work/1.log"; echo "FAIL: steps 1-10 on two hosts" >&2; exit 1; }
echo "steps 1-10 on hosts A and B (np 2, ZeRO-1): $(ls "$work/run" | grep -c '\.r[0-9]*\.safetensors') shard files"
ip netns exec dtA "$dtrain" "${TRAIN[@]}" --resume --stop-at 15 >"$work/2.log" 2>&1 ||
  { cat "$work/2.log"; echo "FAIL: steps 11-15 on host A alone" >&2; exit 1; }
echo "steps 11-15 on host A alone (np 1): resumed from both hosts' shards"
both --resume --json "$work/run.json" >"$work/3.log" 2>&1 || { cat "$work/3.log"; echo "FAIL: steps 16-20 on two hosts" >&2; exit 1; }
echo "steps 16-20 on hosts A and B (np 2, DDP): $(ls "$work/run" | grep -c '\.r[0-9]*\.safetensors') shard files"
python3 - "$work/one.json" "$work/run.json" <<'PY'
import json, sys
a, b = (json.load(open(f))["final_loss"] for f in sys.argv[1:3])
print("final loss: one process %.9f, two hosts -> one -> two %.9f (relative %.1e)" % (a, b, abs(a - b) / abs(a)))
sys.exit(0 if abs(a - b) <= 1e-5 * abs(a) else 1)
PY
