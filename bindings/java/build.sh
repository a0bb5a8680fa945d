#!/usr/bin/env bash
# Builds the Java binding of libdtrain against an installed prefix:
#   bash bindings/java/build.sh PREFIX OUT
# OUT receives gen/ (SWIG's output), libdtrain_jni.so and dtrain.jar. Needs swig, gcc,
# pkg-config and a JDK (javac, jar); PREFIX/lib/pkgconfig/dtrain.pc names the library.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 PREFIX OUT" >&2
  exit 2
fi
STAGE=$(cd "$1" && pwd)
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export PKG_CONFIG_PATH="$STAGE/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

JDK=$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")
[ -f "$JDK/include/jni.h" ] || { echo "no jni.h under $JDK/include" >&2; exit 1; }

echo "== generating the JNI layer (swig)"
rm -rf "$OUT/gen" "$OUT/classes"
mkdir -p "$OUT/gen/org/dtrain/internal" "$OUT/classes"
swig -java -package org.dtrain.internal -outdir "$OUT/gen/org/dtrain/internal" \
  -I"$STAGE/include" -o "$OUT/gen/dtrain_wrap.c" "$ROOT/bindings/swig/dtrain.i"
# Every pointer must reach a typemap: no SWIGTYPE_p_ proxy (nothing that could finalize).
if compgen -G "$OUT/gen/org/dtrain/internal/SWIGTYPE_*" >/dev/null; then
  echo "swig generated pointer proxies (a declaration lacks a typemap):" >&2
  ls "$OUT/gen/org/dtrain/internal/" >&2
  exit 1
fi

echo "== compiling libdtrain_jni.so"
# shellcheck disable=SC2046
gcc -std=c11 -O2 -Wall -fPIC -shared -fvisibility=hidden \
  -I"$JDK/include" -I"$JDK/include/linux" $(pkg-config --cflags dtrain) \
  "$OUT/gen/dtrain_wrap.c" -o "$OUT/libdtrain_jni.so" $(pkg-config --libs dtrain)

echo "== compiling dtrain.jar"
find "$HERE/src" "$OUT/gen" -name '*.java' >"$OUT/sources.txt"
javac --release 17 -encoding UTF-8 -Xlint:all -d "$OUT/classes" @"$OUT/sources.txt"
jar --create --file "$OUT/dtrain.jar" -C "$OUT/classes" .
echo "built $OUT/dtrain.jar and $OUT/libdtrain_jni.so"
