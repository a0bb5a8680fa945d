#!/usr/bin/env bash
# Builds the Java binding against an installed libdtrain and runs TrainGpt.java:
#   bash samples/java/run.sh PREFIX [CHECKPOINT_STEM]
# Build outputs go to $DTRAIN_JAVA_OUT (default: build/java under the repository root);
# the build's progress goes to stderr, the sample's lines to stdout.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 PREFIX [CHECKPOINT_STEM]" >&2
  exit 2
fi
PREFIX=$(cd "$1" && pwd)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${DTRAIN_JAVA_OUT:-$ROOT/build/java}

bash "$ROOT/bindings/java/build.sh" "$PREFIX" "$OUT" >&2
mkdir -p "$OUT/sample-classes"
javac --release 17 -encoding UTF-8 -cp "$OUT/dtrain.jar" -d "$OUT/sample-classes" "$ROOT/samples/java/TrainGpt.java"
export LD_LIBRARY_PATH="$PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec java -Djava.library.path="$OUT" -cp "$OUT/dtrain.jar:$OUT/sample-classes" TrainGpt "${@:2}"
