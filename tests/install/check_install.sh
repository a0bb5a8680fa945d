#!/usr/bin/env bash
# Installs the build into a fresh prefix, then builds and runs a consumer twice: a CMake
# project through find_package(dtrain), and a plain Makefile through pkg-config. The
# bindings' tests (tests/bindings) build against the same prefix. Usage: check_install.sh BUILD_DIR WORK_DIR SRC_DIR
set -euo pipefail
build=$1 work=$2 src=$3
rm -rf "$work" && mkdir -p "$work"
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name 'libdtrain.so' | head -1)")
test -f "$prefix/include/dtrain/dtrain.h"
test -f "$libdir/pkgconfig/dtrain.pc"
test -f "$libdir/cmake/dtrain/dtrainConfig.cmake"
real=$(readlink -f "$libdir/libdtrain.so")
case "$real" in *libdtrain.so.*.*.*) ;; *) echo "not versioned: $real"; exit 1 ;; esac

cmake -S "$src/consumer" -B "$work/cmake-consumer" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake-consumer" >/dev/null
LD_LIBRARY_PATH="$libdir" "$work/cmake-consumer/consumer"

export PKG_CONFIG_PATH="$libdir/pkgconfig"
mkdir -p "$work/make-consumer"
make -s -f "$src/Makefile" OUT="$work/make-consumer" >/dev/null
LD_LIBRARY_PATH="$libdir" "$work/make-consumer/consumer"
echo "install check passed"
