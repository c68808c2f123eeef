#!/usr/bin/env bash
# --help of fedagg's three programs lists the flags a user sets, grouped, each with its
# default: for every source file that defines a program's flags (fedagg-server's are
# grouped by concern in service/flags/), --help has a group named after the file, and every
# flag the file defines (read from the source, so a flag added later is checked too)
# appears as "--name (...); default: ...". A help that worked exits 0; an unknown flag
# still fails.
# Usage: help_test.sh SOURCE_DIR FEDAGG_SERVER FEDAGG_CLIENT FEDAGG_LOADGEN
set -euo pipefail
SOURCE=$1
declare -A SOURCES=([$2]="$(cd "$SOURCE" && echo service/flags/*_flags.cc)"
                    [$3]=client_stub/cli/fedagg_client_main.cc [$4]=client_stub/loadgen/loadgen_main.cc)
failed=0
for program in "$2" "$3" "$4"; do
  rc=0
  help=$("$program" --help 2>&1) || rc=$?
  [ "$rc" -eq 0 ] || { echo "$(basename "$program") --help exited $rc, not 0" >&2; failed=1; }
  rc=0
  "$program" --no_such_flag_at_all >/dev/null 2>&1 || rc=$?
  [ "$rc" -ne 0 ] || { echo "$(basename "$program") --no_such_flag_at_all exited 0" >&2; failed=1; }
  # Each flag's entry, joined across its wrapped lines, ends with its default.
  entries=$(awk '/^    --[a-z_0-9]+ / { if (entry) print entry; entry = "" }
                 { sub(/^ +/, ""); entry = entry (entry ? " " : "") $0 }
                 END { print entry }' <<<"$help")
  count=0
  for source in ${SOURCES[$program]}; do
    flags=$(grep -oE '^ABSL_FLAG\([^,]+, *[a-z_0-9]+' "$SOURCE/$source" | sed -E 's/.*, *//')
    [ -n "$flags" ] || { echo "no flags read from $source" >&2; exit 1; }
    grep -q "Flags from $source:" <<<"$help" || { echo "$(basename "$program") --help: no group for $source" >&2; failed=1; }
    for flag in $flags; do
      count=$((count + 1))
      grep -qE "^--$flag \(.*\); default: " <<<"$entries" ||
        { echo "$(basename "$program") --help does not list --$flag with its default" >&2; failed=1; }
    done
  done
  echo "$(basename "$program") --help: $count flags listed in $(wc -w <<<"${SOURCES[$program]}") group(s)"
done
exit "$failed"
