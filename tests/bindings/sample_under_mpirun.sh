#!/usr/bin/env bash
# Runs a language's sample under `mpirun -np 2` with DTRAIN_BACKEND=mpi (one rank per
# process; rank 0 prints) and keeps its stdout in OUT, for same_losses.sh. Does nothing
# where mpirun is missing or DTRAIN_TEST_NO_MPI=1.
# Usage: sample_under_mpirun.sh OUT STEM COMMAND [ARGS...]
set -euo pipefail
out=$1 stem=$2
shift 2
if ! command -v mpirun >/dev/null || [ "${DTRAIN_TEST_NO_MPI:-0}" = 1 ]; then
  echo "== (no mpirun: the sample under mpirun is skipped)"
  exit 0
fi
echo "== the sample under mpirun -np 2 (DTRAIN_BACKEND=mpi)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 DTRAIN_BACKEND=mpi
mpirun -np 2 --oversubscribe "$@" "$stem" | tee "$out"
bash "$(dirname "$0")/check_sample.sh" "$out" "$stem"
