#!/usr/bin/env bash
# A rank that stops participating (SIGSTOP, as a frozen host or a cut link looks to its
# peers) must not keep the job alive: the other rank's --timeout fires, it aborts the world,
# and mpirun ends (with the stopped rank) within the timeout plus a few seconds.
#   stopped_rank_ends.sh MPIEXEC DTRAIN WORKDIR
set -u
MPIEXEC=$1 D=$2 W=$3
rm -rf "$W" && mkdir -p "$W" && cd "$W" || exit 1
timeout_s=3 stop_after=2 slack=8
cat >rank.sh <<RANK
#!/bin/bash
# Rank 1 stops itself after ${stop_after} s of training; exec keeps its pid for the kill.
[ "\${OMPI_COMM_WORLD_RANK:-0}" = 1 ] && (sleep ${stop_after}; kill -STOP \$\$) &
exec "$D" train --backend mpi --timeout ${timeout_s} --data addition --digits 2 --layers 1 --d-model 32 --heads 2 \
  --steps 1000000 --batch 12 --no-progress --threads 1 --eval-problems 0 --out run
RANK
chmod +x rank.sh
t0=$(date +%s.%N)
timeout 60 "$MPIEXEC" -np 2 --oversubscribe -x OPENBLAS_NUM_THREADS=1 ./rank.sh >log.txt 2>&1
rc=$?
took=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
cat log.txt | grep -v '^$' | tail -5
limit=$((stop_after + timeout_s + slack))
echo "mpirun ended with $rc after $took s (limit $limit s)"
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "FAIL: mpirun exit $rc (124: it had to be killed)"; exit 1; }
awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t <= l) }' || { echo "FAIL: took longer than $limit s"; exit 1; }
grep -q 'rank(s) \[1\] did not' log.txt || { echo "FAIL: the message does not name rank 1"; exit 1; }
echo "stopped rank ends OK"
