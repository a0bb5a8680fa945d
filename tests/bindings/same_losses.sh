#!/usr/bin/env bash
# The cross-language check: every language's sample (same config, same seed) printed the
# same `step N loss X` lines, character for character. Usage: same_losses.sh NAME=FILE...
set -euo pipefail
first="" first_name=""
for pair in "$@"; do
  name=${pair%%=*} file=${pair#*=}
  lines=$(grep '^step ' "$file" || true)
  if [ "$(printf '%s\n' "$lines" | grep -c '^step ')" -ne 30 ]; then
    echo "$name: expected 30 step lines in $file"; exit 1
  fi
  if [ -z "$first" ]; then
    first=$lines first_name=$name
  elif [ "$lines" != "$first" ]; then
    echo "$name differs from $first_name:"; diff <(printf '%s\n' "$first") <(printf '%s\n' "$lines") || true
    exit 1
  fi
  printf "%-10s %s | %s\n" "$name" "$(printf '%s\n' "$lines" | head -1)" "$(printf '%s\n' "$lines" | tail -1)"
done
echo "identical loss sequences in $# runs"
