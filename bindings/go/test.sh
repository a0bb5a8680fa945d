#!/usr/bin/env bash
# test.sh STAGE WORK: checks that the committed SWIG output matches the interface and the
# header, builds the Go binding against the libdtrain installed under STAGE, vets the whole
# module and runs its tests and examples (go test), then builds and runs samples/go with
# WORK/sample-ckpt/gpt as its checkpoint stem (stdout also in WORK/sample.out). Every output
# goes under WORK, which is wiped. LD_LIBRARY_PATH is unset: the programs find libdtrain
# through the rpath that dtrain.pc's Libs give them, as a user's programs do.
#
#   bash bindings/go/test.sh /work/main/build/default/stage /tmp/go-work
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 STAGE WORK" >&2
  exit 2
fi
stage=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$2"
mkdir -p "$2"
work=$(cd "$2" && pwd)

export GOPROXY=off GOFLAGS=-mod=mod GO111MODULE=on GOTOOLCHAIN=local CGO_ENABLED=1
export GOCACHE="$work/gocache" GOPATH="$work/gopath" GOTMPDIR="$work/tmp"
export PKG_CONFIG_PATH="$stage/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
unset LD_LIBRARY_PATH
mkdir -p "$GOTMPDIR"
if ! command -v "${PKG_CONFIG:-pkg-config}" >/dev/null 2>&1; then
  # No pkg-config on this machine: answer cgo's two questions from the installed prefix.
  mkdir -p "$work/bin"
  cat >"$work/bin/pkg-config" <<SHIM
#!/bin/sh
case " \$* " in
  *" --cflags "*) echo "-I$stage/include" ;;
  *" --libs "*) echo "-L$stage/lib -Wl,-rpath,$stage/lib -ldtrain" ;;
esac
SHIM
  chmod +x "$work/bin/pkg-config"
  export PKG_CONFIG="$work/bin/pkg-config"
fi
go version
case " $("${PKG_CONFIG:-pkg-config}" --libs dtrain) " in
  *" -Wl,-rpath,"*) ;;
  *) echo "FAIL: $stage/lib/pkgconfig/dtrain.pc gives no -Wl,-rpath in its Libs, so Go programs" \
          "would need LD_LIBRARY_PATH: install libdtrain again (pkgconfig/dtrain.pc.in has it)" >&2
     exit 1 ;;
esac

echo "== checking internal/cdt against bindings/swig/dtrain.i (regenerating into WORK)"
bash "$root/bindings/go/generate.sh" "$stage" "$work/cdt"
for f in cdt.go dtrain_wrap.c; do
  if ! cmp -s "$work/cdt/$f" "$root/bindings/go/internal/cdt/$f"; then
    diff -u "$root/bindings/go/internal/cdt/$f" "$work/cdt/$f" | head -40 || true
    echo "FAIL: bindings/go/internal/cdt/$f is stale: run bash bindings/go/generate.sh $stage" >&2
    exit 1
  fi
done

echo "== building the Go binding (bindings/go)"
cd "$root/bindings/go"
go build ./...
go vet ./...

echo "== testing the Go binding (go test ./...)"
go test -count=1 ./...

echo "== building the sample (samples/go)"
cd "$root/samples/go"
go vet .
go build -o "$work/sample-go" .

echo "== running the sample"
cd "$work"
"$work/sample-go" "$work/sample-ckpt/gpt" | tee "$work/sample.out"
bash "$root/tests/bindings/check_sample.sh" "$work/sample.out" "$work/sample-ckpt/gpt"
bash "$root/tests/bindings/sample_under_mpirun.sh" "$work/sample_mpi.out" "$work/sample-mpi/gpt" "$work/sample-go"
echo "== go binding: all green"
