#!/usr/bin/env bash
# --help of fedagg's three programs lists the flags a user sets, each with its default: for
# every program, the flags it defines (read from its own source, so a flag added later is
# checked too) must all appear as "--name (...); default: ...".
# Usage: help_test.sh SOURCE_DIR FEDAGG_SERVER FEDAGG_CLIENT FEDAGG_LOADGEN
set -euo pipefail
SOURCE=$1
declare -A PROGRAMS=([service/main.cc]=$2 [client_stub/cli/fedagg_client_main.cc]=$3
                     [client_stub/loadgen/loadgen_main.cc]=$4)
failed=0
for source in "${!PROGRAMS[@]}"; do
  program=${PROGRAMS[$source]}
  help=$("$program" --help 2>&1 || true)
  flags=$(grep -oE '^ABSL_FLAG\([^,]+, *[a-z_0-9]+' "$SOURCE/$source" | sed -E 's/.*, *//')
  [ -n "$flags" ] || { echo "no flags read from $source" >&2; exit 1; }
  grep -q "Flags from $source:" <<<"$help" || { echo "$(basename "$program") --help: no group for $source" >&2; failed=1; }
  # Each flag's entry, joined across its wrapped lines, ends with its default.
  entries=$(awk '/^    --[a-z_0-9]+ / { if (entry) print entry; entry = "" }
                 { sub(/^ +/, ""); entry = entry (entry ? " " : "") $0 }
                 END { print entry }' <<<"$help")
  for flag in $flags; do
    grep -qE "^--$flag \(.*\); default: " <<<"$entries" ||
      { echo "$(basename "$program") --help does not list --$flag with its default" >&2; failed=1; }
  done
  echo "$(basename "$program") --help: $(wc -w <<<"$flags") flags listed"
done
exit "$failed"
