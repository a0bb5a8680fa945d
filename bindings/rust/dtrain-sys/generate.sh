#!/usr/bin/env bash
# Regenerates src/bindings.rs from dtrain.h with Debian's bindgen 0.60 (/usr/bin/bindgen).
#   generate.sh [HEADER] [OUT]
# HEADER: default $DTRAIN_INCLUDE_DIR/dtrain/dtrain.h, else pkg-config's includedir of
#         dtrain, else the repository's include/dtrain/dtrain.h.
# OUT:    default src/bindings.rs next to this script.
# Only dt_* functions and types and DT_* constants are kept; the status codes, dtypes and
# tags of the header's anonymous enums come out as plain constants.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
header="${1:-}"
if [[ -z "$header" ]]; then
  if [[ -n "${DTRAIN_INCLUDE_DIR:-}" ]]; then
    header="$DTRAIN_INCLUDE_DIR/dtrain/dtrain.h"
  elif inc="$(pkg-config --variable=includedir dtrain 2>/dev/null)" && [[ -n "$inc" ]]; then
    header="$inc/dtrain/dtrain.h"
  else
    header="$here/../../../include/dtrain/dtrain.h"
  fi
fi
out="${2:-$here/src/bindings.rs}"
[[ -f "$header" ]] || { echo "generate.sh: no header at $header" >&2; exit 1; }
bindgen="${BINDGEN:-/usr/bin/bindgen}"
command -v "$bindgen" >/dev/null || bindgen=bindgen

args=(
  --allowlist-function 'dt_.*'
  --allowlist-type 'dt_.*'
  --allowlist-var 'DT_.*'
  --size_t-is-usize
  --translate-enum-integer-types
  --no-layout-tests
)
# rustfmt (from the Rust toolchain) makes the file readable; without it the output is
# still valid Rust, and test.sh's drift check then compares ignoring whitespace.
command -v rustfmt >/dev/null || args+=(--no-rustfmt-bindings)
"$bindgen" "$header" "${args[@]}" -o "$out"
echo "generate.sh: wrote $out from $header"
