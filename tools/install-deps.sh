#!/usr/bin/env bash
# Installs the Debian 12 packages libdtrain builds and tests with, only if any is missing.
# Idempotent; needs root (or sudo) only when something must be installed.
# docs/dependencies.md says why each one was chosen.
set -euo pipefail
packages=(
  build-essential cmake pkg-config binutils   # compiler, build, nm/objdump for the ABI test
  libopenblas-dev                             # the CPU BLAS the kernels call
  libblis-dev                                 # the BLAS it was chosen against (bench_blas_choice)
  libgtest-dev                                # unit tests
  nlohmann-json3-dev                          # JSON: checkpoint index and headers (lib/io)
  libcli11-dev                                # the dtrain command line's flags and --help
  libopenmpi-dev openmpi-bin                  # the mpi backend (DTRAIN_WITH_MPI)
  swig                                        # the Python, Java and Go bindings' wrappers
  python3-dev python3-venv python3-pip python3-setuptools  # build and pip-install the Python binding
  python3-pytest python3-numpy                # its tests (numpy: zero-copy buffers)
  golang-go                                   # the Go binding (cgo)
  openjdk-17-jdk-headless junit5              # the Java binding and its JUnit tests
  bindgen libclang-dev                        # regenerates the Rust -sys bindings (drift check; bindgen loads libclang)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
