#!/usr/bin/env bash
# The header lists of docs/design.md ("Public headers") against include/ucp/: the public table
# must name exactly the headers of each include/ucp/<layer>/, and the plumbing table exactly the
# headers of the include/ucp/<layer>/detail/ folders. So the list of what a program includes
# cannot drift from the installed tree.
#
#   tests/docs/public-headers.sh SOURCE_DIR
#
# Exit 0 when they agree; 1 with one line per difference.
set -euo pipefail
source_dir=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
doc=$source_dir/docs/design.md
include=$source_dir/include/ucp

# The rows of the markdown table that follows `marker` (up to the first line that is not a row).
table_after() {
  awk -v marker="$1" '
    index($0, marker) { found = 1; next }
    found && /^\|/ { started = 1; print; next }
    found && started { exit }' "$doc"
}

status=0
compare() {  # what, documented list, actual list
  if [ "$2" != "$3" ]; then
    echo "docs/design.md: $1: the table says '$2', the tree has '$3'" >&2
    status=1
  fi
}

# Public headers: rows "| <layer> | A.h B.h (remarks) ... |"; the header row and the rule skipped.
declare -A seen
while IFS= read -r row; do
  layer=$(echo "$row" | awk -F'|' '{gsub(/ /, "", $2); print $2}')
  [ -z "$layer" ] || [ "$layer" = layer ] || [[ "$layer" == -* ]] && continue
  cells=$(echo "$row" | awk -F'|' '{print $3}' | sed 's/([^)]*)//g')
  documented=$(echo "$cells" | tr ' ' '\n' | grep '\.h$' | sort | tr '\n' ' ' | sed 's/ $//')
  if [ "$layer" = "(generated)" ]; then continue; fi
  seen[$layer]=1
  if [ ! -d "$include/$layer" ]; then
    echo "docs/design.md: public headers: no include/ucp/$layer/" >&2
    status=1
    continue
  fi
  actual=$(cd "$include/$layer" && ls -1 -- *.h 2>/dev/null | sort | tr '\n' ' ' | sed 's/ $//')
  compare "public headers of $layer" "$documented" "$actual"
done < <(table_after "The public set (\`include/ucp/\`):")
for dir in "$include"/*/; do
  layer=$(basename "$dir")
  ls "$dir"*.h >/dev/null 2>&1 || continue
  [ -n "${seen[$layer]:-}" ] || { echo "docs/design.md: public headers: layer '$layer' has no row" >&2; status=1; }
done

# Plumbing: rows "| io/detail/A.h, B.h | what it is |": a name with a slash sets the folder of
# the names after it.
documented=$(table_after "The plumbing (\`include/ucp/<layer>/detail/\`):" | awk -F'|' '{print $2}' |
  tr ',' ' ' | tr ' ' '\n' | awk '
    /\// { n = split($0, part, "/"); folder = part[1] "/" part[2]; print; next }
    /\.h$/ { print folder "/" $0 }' | sort | tr '\n' ' ' | sed 's/ $//')
actual=$(cd "$include" && ls -1 -- */detail/*.h 2>/dev/null | sort | tr '\n' ' ' | sed 's/ $//')
compare "plumbing headers" "$documented" "$actual"

[ "$status" = 0 ] && echo "public headers: the tables of docs/design.md name every header of include/ucp/"
exit $status
