#!/usr/bin/env bash
# The Python binding's tests: pip-installs bindings/python (scikit-build-core, with pip's
# build isolation: it fetches the build backend) against the libdtrain installed at STAGE
# into a virtual environment under WORK, then, with LD_LIBRARY_PATH unset (the package
# carries libdtrain.so.0 and finds it through its RPATH), runs pytest, the sample (stdout
# also in WORK/sample.out) and, where mpirun exists, the sample again with one rank per
# process. Usage: bash bindings/python/test.sh STAGE WORK
set -euo pipefail
stage=$(readlink -f "$1") work=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work"
work=$(readlink -f "$work")
unset LD_LIBRARY_PATH PKG_CONFIG_PATH
# Debian's python3 has python3-numpy and python3-pytest; another python3 may lack them.
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)

echo "== building the Python binding (pip install: scikit-build-core, swig, cmake) with $py"
"$py" -m venv --system-site-packages "$work/venv"
# pip builds in the tree it is given: give it a copy (bindings/python beside bindings/swig,
# which CMakeLists.txt reads as ../swig), so the sources stay clean.
mkdir -p "$work/src/bindings" && cp -r "$src/bindings/python" "$src/bindings/swig" "$work/src/bindings/"
"$work/venv/bin/python" -m pip install -q \
  --config-settings=cmake.define.CMAKE_PREFIX_PATH="$stage" "$work/src/bindings/python"
cd "$work"  # never import the source tree's dtrain, which has no native module

echo "== testing (pytest)"
cp -r "$src/bindings/python/tests" "$work/tests"
# The Hugging Face fixtures (tests/fixtures/hf) stay in the source tree.
DTRAIN_FIXTURES="$src/tests/fixtures" "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$work/tests"

echo "== sample: samples/python/train_gpt.py"
"$work/venv/bin/python" "$src/samples/python/train_gpt.py" "$work/sample-ckpt/gpt" | tee "$work/sample.out"
bash "$src/tests/bindings/check_sample.sh" "$work/sample.out" "$work/sample-ckpt/gpt"

bash "$src/tests/bindings/sample_under_mpirun.sh" "$work/sample_mpi.out" "$work/sample-mpi/gpt" \
  "$work/venv/bin/python" "$src/samples/python/train_gpt.py"
echo "python binding: all passed"
