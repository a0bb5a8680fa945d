#!/usr/bin/env bash
# Builds the Java binding against STAGE (an installed prefix), runs its JUnit 5 tests and
# the sample, all outputs under WORK (wiped first):
#   bash bindings/java/test.sh /work/main/build/default/stage /tmp/java-work
set -euo pipefail
# The JVM takes its file-name encoding from the locale: with LANG unset (a fresh machine,
# CI) it is ASCII and a non-ASCII path cannot even be made. The sources are UTF-8 too.
export LC_ALL=C.UTF-8

if [ $# -ne 2 ]; then
  echo "usage: $0 STAGE WORK" >&2
  exit 2
fi
START=$(date +%s)
STAGE=$(cd "$1" && pwd)
rm -rf "$2"
mkdir -p "$2"
WORK=$(cd "$2" && pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
JUNIT=/usr/share/java/junit-platform-console-standalone.jar
[ -f "$JUNIT" ] || { echo "missing $JUNIT (Debian package junit5)" >&2; exit 1; }

echo "== building the binding"
bash "$HERE/build.sh" "$STAGE" "$WORK"
export LD_LIBRARY_PATH="$STAGE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Two in-process ranks share this machine's cores.
JAVA_OPTS=(-Djava.library.path="$WORK" -Xcheck:jni)

echo "== compiling the tests"
mkdir -p "$WORK/test-classes"
javac --release 17 -encoding UTF-8 -Xlint:all -Werror -cp "$WORK/dtrain.jar:$JUNIT" -d "$WORK/test-classes" \
  $(find "$HERE/test" -name '*.java')

echo "== testing (JUnit 5)"
set +e
java "${JAVA_OPTS[@]}" -Ddtrain.test.work="$WORK" -jar "$JUNIT" \
  --class-path "$WORK/dtrain.jar:$WORK/test-classes" --select-package org.dtrain \
  --fail-if-no-tests --disable-banner --disable-ansi-colors --details=tree 2>&1 | tee "$WORK/junit.out"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
  echo "JUnit failed (exit $rc)" >&2
  exit 1
fi
# -Xcheck:jni reports misuse of JNI as warnings: treat any as a failure.
if grep -q "WARNING in native method\|FATAL ERROR in native method" "$WORK/junit.out"; then
  echo "-Xcheck:jni reported JNI misuse (see $WORK/junit.out)" >&2
  exit 1
fi

echo "== building the sample"
mkdir -p "$WORK/sample-classes"
javac --release 17 -encoding UTF-8 -cp "$WORK/dtrain.jar" -d "$WORK/sample-classes" "$ROOT/samples/java/TrainGpt.java"

echo "== running the sample"
java -Djava.library.path="$WORK" -cp "$WORK/dtrain.jar:$WORK/sample-classes" TrainGpt "$WORK/sample-ckpt/gpt" \
  >"$WORK/sample.out"
cat "$WORK/sample.out"
bash "$ROOT/tests/bindings/check_sample.sh" "$WORK/sample.out" "$WORK/sample-ckpt/gpt"
bash "$ROOT/tests/bindings/sample_under_mpirun.sh" "$WORK/sample_mpi.out" "$WORK/sample-mpi/gpt" \
  java -Djava.library.path="$WORK" -cp "$WORK/dtrain.jar:$WORK/sample-classes" TrainGpt

echo "== java: all passed in $(( $(date +%s) - START ))s"
