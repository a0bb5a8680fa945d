#!/usr/bin/env bash
# The Python binding's tests: pip-installs bindings/python against the libdtrain installed
# at STAGE into a virtual environment under WORK, runs pytest, the sample (stdout also in
# WORK/sample.out) and, where mpirun exists, two ranks under mpirun.
# Usage: bash bindings/python/test.sh STAGE WORK
set -euo pipefail
stage=$(readlink -f "$1") work=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work"
work=$(readlink -f "$work")
export PKG_CONFIG_PATH="$stage/lib/pkgconfig"
# Debian's python3 has python3-numpy and python3-pytest; another python3 may lack them.
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)

echo "== building the Python binding (swig, pip install) with $py"
"$py" -m venv --system-site-packages "$work/venv"
# pip builds in the tree it is given: give it a copy, so the sources stay clean.
mkdir -p "$work/src/bindings" && cp -r "$src/bindings/python" "$src/bindings/swig" "$work/src/bindings/"
"$work/venv/bin/python" -m pip install -q --no-build-isolation --no-index "$work/src/bindings/python"
cd "$work"  # never import the source tree's dtrain, which has no native module

echo "== testing (pytest)"
cp -r "$src/bindings/python/tests" "$work/tests"
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$work/tests"

echo "== sample: samples/python/train_gpt.py"
"$work/venv/bin/python" "$src/samples/python/train_gpt.py" "$work/sample-ckpt/gpt" | tee "$work/sample.out"
grep -q "^step 30 loss" "$work/sample.out"

if command -v mpirun >/dev/null && [ "${DTRAIN_TEST_NO_MPI:-0}" != 1 ]; then
  echo "== two ranks under mpirun (Mesh(\"mpi\"))"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  mpirun -np 2 "$work/venv/bin/python" "$work/tests/mpi_train.py" 5 | tee "$work/mpi.out"
  # One rank per process must train as two in-process ranks do, to float rounding.
  "$work/venv/bin/python" - "$work/mpi.out" "$work/sample.out" <<'PY'
import sys
mpi = [float(l.split()[3]) for l in open(sys.argv[1]) if l.startswith("step")]
local = [float(l.split()[3]) for l in open(sys.argv[2]) if l.startswith("step")][:len(mpi)]
assert len(mpi) == 5 and max(abs(a - b) for a, b in zip(mpi, local)) < 1e-5, (mpi, local)
print("mpirun losses match the in-process ones:", mpi == local and "bitwise" or "within 1e-5")
PY
fi
echo "python binding: all passed"
