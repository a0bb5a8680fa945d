#!/usr/bin/env bash
# Builds the Java binding against STAGE (an installed prefix), runs its JUnit 5 tests and
# the sample, all outputs under WORK (wiped first):
#   bash bindings/java/test.sh /work/main/build/default/stage /tmp/java-work
# Everything runs the way a user runs the artifact: `java -cp dtrain-VERSION.jar:...` with
# no java.library.path and no LD_LIBRARY_PATH (the jar loads the libraries it carries).
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
VERSION=$(sed -n 's/^version=//p' "$WORK/classes/META-INF/maven/org.dtrain/dtrain/pom.properties")
JAR="$WORK/dtrain-$VERSION.jar"
# As a user would run it: nothing but the jar on the class path.
unset LD_LIBRARY_PATH
JAVA=(env -u LD_LIBRARY_PATH -u DTRAIN_JNI_LIBRARY java)

echo "== compiling the tests"
mkdir -p "$WORK/test-classes"
javac --release 17 -encoding UTF-8 -Xlint:all -Werror -cp "$JAR:$JUNIT" -d "$WORK/test-classes" \
  $(find "$HERE/test" -name '*.java')

echo "== testing (JUnit 5)"
set +e
# -Xcheck:jni checks every JNI call the binding makes.
"${JAVA[@]}" -Xcheck:jni -Ddtrain.test.work="$WORK" -Ddtrain.test.fixtures="$ROOT/tests/fixtures" -jar "$JUNIT" \
  --class-path "$JAR:$WORK/test-classes" --select-package org.dtrain \
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
javac --release 17 -encoding UTF-8 -Xlint:all -Werror -cp "$JAR" -d "$WORK/sample-classes" "$ROOT/samples/java/TrainGpt.java"

echo "== running the sample (java -cp dtrain-$VERSION.jar:sample-classes TrainGpt)"
"${JAVA[@]}" -cp "$JAR:$WORK/sample-classes" TrainGpt "$WORK/sample-ckpt/gpt" >"$WORK/sample.out"
cat "$WORK/sample.out"
bash "$ROOT/tests/bindings/check_sample.sh" "$WORK/sample.out" "$WORK/sample-ckpt/gpt"
bash "$ROOT/tests/bindings/sample_under_mpirun.sh" "$WORK/sample_mpi.out" "$WORK/sample-mpi/gpt" \
  "${JAVA[@]}" -cp "$JAR:$WORK/sample-classes" TrainGpt

echo "== the artifact: a POM inside and beside the jar, and a local Maven repository"
listing=$(jar --list --file "$JAR")
for f in 'META-INF/maven/org\.dtrain/dtrain/pom\.xml' 'META-INF/maven/org\.dtrain/dtrain/pom\.properties' \
  'native/[a-z]*-[a-z0-9_]*/libdtrain_jni\.so' 'native/[a-z]*-[a-z0-9_]*/libdtrain\.so\.[0-9]*' \
  'native/[a-z]*-[a-z0-9_]*/libraries'; do
  grep -qx "$f" <<<"$listing" || { echo "the jar lacks $f" >&2; exit 1; }
done
grep -q "<version>$VERSION</version>" "$WORK/dtrain-$VERSION.pom"
for f in "dtrain-$VERSION.jar" "dtrain-$VERSION.pom" "dtrain-$VERSION-sources.jar"; do
  [ -f "$WORK/maven-repo/org/dtrain/dtrain/$VERSION/$f.sha1" ] || { echo "missing $f in maven-repo" >&2; exit 1; }
done
# The extracted copies of the libraries are gone once they are loaded.
leftover=$(find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'dtrain-native-*' -user "$(id -u)" -newer "$JAR" 2>/dev/null || true)
[ -z "$leftover" ] || { echo "extracted libraries left behind: $leftover" >&2; exit 1; }

echo "== java: all passed in $(( $(date +%s) - START ))s"
