#!/usr/bin/env bash
# Builds the Java binding against an installed libdtrain and runs TrainGpt.java:
#   bash samples/java/run.sh PREFIX [CHECKPOINT_STEM]
# Build outputs go to $DTRAIN_JAVA_OUT (default: build/java under the repository root);
# the build's progress goes to stderr, the sample's lines to stdout. The program runs as a
# user runs it: the binding's jar on the class path, nothing else (it carries libdtrain).
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 PREFIX [CHECKPOINT_STEM]" >&2
  exit 2
fi
PREFIX=$(cd "$1" && pwd)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${DTRAIN_JAVA_OUT:-$ROOT/build/java}

bash "$ROOT/bindings/java/build.sh" "$PREFIX" "$OUT" >&2
VERSION=$(sed -n 's/^version=//p' "$OUT/classes/META-INF/maven/org.dtrain/dtrain/pom.properties")
JAR="$OUT/dtrain-$VERSION.jar"
mkdir -p "$OUT/sample-classes"
javac --release 17 -encoding UTF-8 -cp "$JAR" -d "$OUT/sample-classes" "$ROOT/samples/java/TrainGpt.java"
exec env -u LD_LIBRARY_PATH java -cp "$JAR:$OUT/sample-classes" TrainGpt "${@:2}"
