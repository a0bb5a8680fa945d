#!/usr/bin/env bash
# Builds and tests the Rust binding against an installed libdtrain, then runs the sample.
#   bash bindings/rust/test.sh STAGE WORK
# STAGE: an installed prefix (include/dtrain/dtrain.h, lib/libdtrain.so, lib/pkgconfig).
# WORK:  a scratch dir, wiped first; every build output goes under it.
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 STAGE WORK" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
stage="$(cd "$1" && pwd)"
work="$2"
rm -rf "$work"
mkdir -p "$work"
work="$(cd "$work" && pwd)"

export PKG_CONFIG_PATH="$stage/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# No LD_LIBRARY_PATH: the tests and the sample find libdtrain through the rpath that
# dtrain-sys's build script gives them (DEP_DTRAIN_RPATH), as a user's program would.
unset LD_LIBRARY_PATH DTRAIN_RPATH
export CARGO_TARGET_DIR="$work/target"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
unset DTRAIN_LIB_DIR DTRAIN_INCLUDE_DIR
start=$SECONDS
# Whichever cargo is first on PATH: Debian's (apt cargo rustc, 1.63, what
# tools/install-deps.sh installs) or a rustup one. The crates need nothing newer.
cargo --version
rustc --version

echo "== checking src/bindings.rs against $stage/include/dtrain/dtrain.h (bindgen drift)"
committed="$here/dtrain-sys/src/bindings.rs"
fresh="$work/bindings.rs"
bash "$here/dtrain-sys/generate.sh" "$stage/include/dtrain/dtrain.h" "$fresh" >/dev/null
if ! diff -u "$committed" "$fresh" >"$work/bindings.diff"; then
  if command -v rustfmt >/dev/null; then
    cat "$work/bindings.diff"
    echo "FAIL: the committed bindings differ from the header; run dtrain-sys/generate.sh" >&2
    exit 1
  fi
  # Without rustfmt bindgen's output is unformatted: compare ignoring whitespace and the
  # trailing commas rustfmt adds.
  norm() { tr -d '[:space:]' <"$1" | sed 's/,)/)/g; s/,}/}/g; s/,>/>/g; s/,]/]/g'; }
  if [[ "$(norm "$committed")" != "$(norm "$fresh")" ]]; then
    echo "FAIL: the committed bindings differ from the header; run dtrain-sys/generate.sh" >&2
    exit 1
  fi
  echo "   (no rustfmt: compared ignoring whitespace)"
fi
echo "   bindings up to date"

echo "== building the workspace (dtrain-sys, dtrain) in $CARGO_TARGET_DIR"
cd "$here"
cargo --offline build --all-targets --quiet
cargo --offline test --no-run --quiet

echo "== testing: cargo --offline test"
rc=0
cargo --offline test >"$work/test.log" 2>&1 || rc=$?
grep -E '^(test |test result|     Running|   Doc-tests)' "$work/test.log" || true
if [[ $rc -ne 0 ]]; then
  cat "$work/test.log"
  echo "FAIL: cargo test exited with $rc" >&2
  exit 1
fi

echo "== building and running samples/rust"
cd "$repo"
cargo --offline build --quiet --manifest-path samples/rust/Cargo.toml
cargo --offline run --quiet --manifest-path samples/rust/Cargo.toml -- "$work/sample-ckpt/gpt" \
  | tee "$work/sample.out"
bash "$repo/tests/bindings/check_sample.sh" "$work/sample.out" "$work/sample-ckpt/gpt"
bash "$repo/tests/bindings/sample_under_mpirun.sh" "$work/sample_mpi.out" "$work/sample-mpi/gpt" \
  "$CARGO_TARGET_DIR/debug/dtrain-sample"

echo "== rust: all passed in $((SECONDS - start)) s"
