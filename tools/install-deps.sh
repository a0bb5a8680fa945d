#!/usr/bin/env bash
# Installs the Debian 12 packages libdtrain builds and tests with, only if any is missing.
#   bash tools/install-deps.sh           everything tools/test.sh needs (every language)
#   bash tools/install-deps.sh --demo    only what tools/demo.sh needs: the library and the
#                                        dtrain command line, without tests, MPI or bindings
# Idempotent; needs root (or sudo) only when something must be installed. apt's output goes
# to a log file, shown only if apt fails. docs/dependencies.md says why each one was chosen.
set -euo pipefail
# The demo's packages: what configuring and building dtrain_cli requires (tools/demo.sh
# turns the tests, benchmarks, MPI and CUDA off).
demo_packages=(
  build-essential cmake                       # compiler and build
  libdnnl-dev                                 # oneDNN: the default CPU GEMM backend (AVX-512 JIT kernels)
  nlohmann-json3-dev                          # JSON: checkpoint index and headers (lib/io)
  libxxhash-dev                               # XXH3 checksums of checkpoint chunks (header only, compiled in)
  libcli11-dev                                # the dtrain command line's flags and --help
  libcpp-httplib-dev pkg-config               # dtrain serve's HTTP server (found through its .pc file)
  libpcre2-dev                                # tokenizer.json split regexes (Unicode classes, lookahead, JIT; lib/io/hf_*)
  libicu-dev                                  # tokenizer.json NFC normalizer and Unicode properties (lib/io/hf_*)
)
# The rest of what tools/test.sh builds and runs.
test_packages=(
  binutils                                    # nm/objdump for the ABI test (pkg-config: above)
  libopenblas-dev libblis-dev                 # the other GEMM backends: the ASan and TSan passes build with them
  libgtest-dev                                # unit tests
  libopenmpi-dev openmpi-bin                  # the mpi backend (DTRAIN_WITH_MPI)
  swig                                        # the Python, Java and Go bindings' wrappers
  python3-dev python3-venv python3-pip        # build and pip-install the Python binding (pip fetches scikit-build-core)
  python3-pytest python3-numpy                # its tests (numpy: zero-copy buffers)
  golang-go                                   # the Go binding (cgo)
  openjdk-17-jdk-headless junit5              # the Java binding and its JUnit tests
  cargo rustc                                 # the Rust crates (Debian's 1.63: the crates' rust-version)
  bindgen libclang-dev                        # regenerates the Rust -sys bindings (drift check; bindgen loads libclang)
  clang libclang-rt-14-dev                    # the fuzz preset: libFuzzer ships with clang, not GCC
)
case "${1:-}" in
  "") packages=("${demo_packages[@]}" "${test_packages[@]}") ;;
  --demo) packages=("${demo_packages[@]}") ;;
  *) echo "usage: $0 [--demo]" >&2; exit 2 ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
log=$(mktemp "${TMPDIR:-/tmp}/dtrain-install-deps.XXXXXX")
echo "install-deps: installing ${#missing[@]} Debian packages: ${missing[*]} (apt log: $log)"
if ! { $SUDO apt-get update &&
       $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"; } \
     >"$log" 2>&1; then
  cat "$log" >&2
  echo "install-deps: apt-get failed (its output above, also in $log)" >&2
  exit 1
fi
rm -f "$log"
