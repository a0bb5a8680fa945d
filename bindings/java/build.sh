#!/usr/bin/env bash
# Builds the Java binding of libdtrain against an installed prefix, as a Maven artifact
# (org.dtrain:dtrain:VERSION, VERSION from dtrain.h) that carries its native code:
#   bash bindings/java/build.sh PREFIX OUT
# OUT receives:
#   dtrain-VERSION.jar          the classes, native/<os>-<arch>/{libdtrain.so.0,
#                               libdtrain_jni.so, libraries} and META-INF/maven/org.dtrain/
#                               dtrain/{pom.xml,pom.properties}: `java -cp dtrain-VERSION.jar:...`
#                               needs no java.library.path and no LD_LIBRARY_PATH
#   dtrain-VERSION.pom          its POM;  dtrain-VERSION-sources.jar  its sources
#   maven-repo/org/dtrain/dtrain/VERSION/   the three as a local Maven repository (with .sha1)
#   native/<os>-<arch>/         the libraries the jar carries; gen/ SWIG's output
# Needs swig, gcc, binutils, pkg-config and a JDK (javac, jar); no network, no Maven.
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

# The version of the header the binding is generated from; the library must agree.
HEADER="$STAGE/include/dtrain/dtrain.h"
part() { sed -n "s/^#define DT_VERSION_$1 \([0-9][0-9]*\).*/\1/p" "$HEADER"; }
VERSION="$(part MAJOR).$(part MINOR).$(part PATCH)"
[[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "no DT_VERSION_* in $HEADER" >&2; exit 1; }
PC_VERSION=$(pkg-config --modversion dtrain)
[ "$PC_VERSION" = "$VERSION" ] || { echo "dtrain.h says $VERSION, dtrain.pc $PC_VERSION" >&2; exit 1; }
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) PLATFORM=linux-x86_64 ;;
  Linux-aarch64) PLATFORM=linux-aarch64 ;;
  *) echo "the jar's loader knows linux-x86_64 and linux-aarch64, not $(uname -s)-$(uname -m)" >&2; exit 1 ;;
esac
NATIVE="$OUT/native/$PLATFORM"
NAME="dtrain-$VERSION"

echo "== generating the JNI layer (swig)"
rm -rf "$OUT/gen" "$OUT/classes" "$OUT/native" "$OUT/maven-repo" "$OUT"/dtrain-*.jar "$OUT"/dtrain-*.pom
mkdir -p "$OUT/gen/org/dtrain/internal" "$OUT/classes" "$NATIVE"
swig -java -package org.dtrain.internal -outdir "$OUT/gen/org/dtrain/internal" \
  -I"$STAGE/include" -o "$OUT/gen/dtrain_wrap.c" "$ROOT/bindings/swig/dtrain.i"
# Every pointer must reach a typemap: no SWIGTYPE_p_ proxy (nothing that could finalize).
if compgen -G "$OUT/gen/org/dtrain/internal/SWIGTYPE_*" >/dev/null; then
  echo "swig generated pointer proxies (a declaration lacks a typemap):" >&2
  ls "$OUT/gen/org/dtrain/internal/" >&2
  exit 1
fi

echo "== compiling libdtrain_jni.so, with libdtrain beside it"
# RUNPATH $ORIGIN: the JNI library finds the libdtrain copied next to it (in the jar, in
# the directory the loader extracts to, in $NATIVE), whatever LD_LIBRARY_PATH says.
# shellcheck disable=SC2016,SC2046
gcc -std=c11 -O2 -Wall -fPIC -shared -fvisibility=hidden \
  -I"$JDK/include" -I"$JDK/include/linux" $(pkg-config --cflags dtrain) \
  "$OUT/gen/dtrain_wrap.c" -o "$NATIVE/libdtrain_jni.so" $(pkg-config --libs dtrain) \
  -Wl,-rpath,'$ORIGIN' -Wl,--enable-new-dtags
# The copy of libdtrain is named by its SONAME, the name libdtrain_jni.so asks for.
SONAME=$(objdump -p "$STAGE/lib/libdtrain.so" | awk '$1 == "SONAME" { print $2 }')
[ -n "$SONAME" ] || { echo "$STAGE/lib/libdtrain.so has no SONAME" >&2; exit 1; }
cp -L "$STAGE/lib/$SONAME" "$NATIVE/$SONAME"
printf '# load order: libdtrain first, then the JNI library that needs it\n%s\nlibdtrain_jni.so\n' \
  "$SONAME" >"$NATIVE/libraries"

echo "== compiling the classes"
find "$HERE/src" "$OUT/gen" -name '*.java' >"$OUT/sources.txt"
javac --release 17 -encoding UTF-8 -Xlint:all -Werror -d "$OUT/classes" @"$OUT/sources.txt"

echo "== packaging $NAME.jar (org.dtrain:dtrain:$VERSION)"
POM="$OUT/$NAME.pom"
sed "s/@VERSION@/$VERSION/g" "$HERE/pom.xml.in" >"$POM"
META="$OUT/classes/META-INF/maven/org.dtrain/dtrain"
mkdir -p "$META" "$OUT/classes/native"
cp "$POM" "$META/pom.xml"
printf 'groupId=org.dtrain\nartifactId=dtrain\nversion=%s\n' "$VERSION" >"$META/pom.properties"
cp -r "$NATIVE" "$OUT/classes/native/"
cat >"$OUT/MANIFEST.MF" <<EOF
Automatic-Module-Name: org.dtrain
Implementation-Title: dtrain
Implementation-Version: $VERSION
Implementation-Vendor-Id: org.dtrain
EOF
jar --create --file "$OUT/$NAME.jar" --manifest "$OUT/MANIFEST.MF" -C "$OUT/classes" .
jar --create --file "$OUT/$NAME-sources.jar" -C "$HERE/src" . -C "$OUT/gen" org

REPO="$OUT/maven-repo/org/dtrain/dtrain/$VERSION"
mkdir -p "$REPO"
for f in "$NAME.jar" "$NAME.pom" "$NAME-sources.jar"; do
  cp "$OUT/$f" "$REPO/$f"
  sha1sum "$REPO/$f" | cut -d' ' -f1 >"$REPO/$f.sha1"
done
echo "built $OUT/$NAME.jar ($PLATFORM), $OUT/$NAME.pom and the repository $OUT/maven-repo"
