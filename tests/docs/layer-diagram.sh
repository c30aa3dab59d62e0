#!/usr/bin/env bash
# The layer diagram of docs/design.md ("3. Layers") against the build: for every layer, the
# layers it uses must be exactly the ucp_<layer> targets its target_link_libraries names in
# src/<layer>/CMakeLists.txt, and the diagram must list every layer the build has. So the
# document cannot drift from the edges CMake enforces.
#
#   tests/docs/layer-diagram.sh SOURCE_DIR
#
# Exit 0 when they agree; 1 with one line per difference.
set -euo pipefail
source_dir=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
doc=$source_dir/docs/design.md

# The layers: every src/<layer>/CMakeLists.txt that calls ucp_add_library(<layer> ...).
declare -A built
for file in "$source_dir"/src/*/CMakeLists.txt; do
  layer=$(sed -n 's/^[[:space:]]*ucp_add_library(\([a-z0-9_]*\).*/\1/p' "$file" | head -n 1)
  [ -n "$layer" ] && built[$layer]=$file
done

# What each layer uses: the ucp_<layer> names of its target_link_libraries(ucp_<layer> ...)
# statement (which may span lines), whatever the keyword (PUBLIC, PRIVATE, INTERFACE).
declare -A uses
for layer in "${!built[@]}"; do
  statement=$(awk -v target="ucp_$layer" '
    !inside && index($0, "target_link_libraries(" target) { inside = 1 }
    inside {
      text = text " " $0
      depth += gsub(/\(/, "(") - gsub(/\)/, ")")
      if (depth <= 0) { print text; exit }
    }' "${built[$layer]}")
  list=""
  for word in $(echo "$statement" | grep -o 'ucp_[a-z0-9_]*' | sort -u); do
    name=${word#ucp_}
    [ "$name" != "$layer" ] && [ -n "${built[$name]:-}" ] && list="$list $name"
  done
  uses[$layer]=$(echo $list | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//')
done

# The diagram: the fenced block of docs/design.md that follows the line
# "<!-- layers: checked against the build by tests/docs/layer-diagram.sh -->". Each line after
# its header names a layer, then the layers it uses ("-" for none), then an optional remark in
# parentheses.
block=$(awk '
  /<!-- layers: checked against the build by tests\/docs\/layer-diagram.sh -->/ { found = 1; next }
  found && /^```/ { if (open) exit; open = 1; header = 1; next }
  open && header { header = 0; next }
  open { print }' "$doc")
if [ -z "$block" ]; then
  echo "$doc: no layer diagram after the layers marker" >&2
  exit 1
fi

status=0
declare -A documented
while IFS= read -r line; do
  line=${line%%(*}
  read -r layer rest <<<"$line" || true
  [ -z "$layer" ] && continue
  documented[$layer]=1
  wanted=$(echo "$rest" | tr ',' ' ' | tr ' ' '\n' | grep -v '^-\?$' | sort | tr '\n' ' ' | sed 's/ $//' || true)
  if [ -z "${built[$layer]:-}" ]; then
    echo "docs/design.md: layer '$layer' is in the diagram but no src/$layer/CMakeLists.txt declares it" >&2
    status=1
  elif [ "$wanted" != "${uses[$layer]}" ]; then
    echo "docs/design.md: '$layer' uses '${wanted:--}' in the diagram, '${uses[$layer]:--}' in src/$layer/CMakeLists.txt" >&2
    status=1
  fi
done <<<"$block"
for layer in "${!built[@]}"; do
  if [ -z "${documented[$layer]:-}" ]; then
    echo "docs/design.md: layer '$layer' (src/$layer/CMakeLists.txt) is missing from the diagram" >&2
    status=1
  fi
done
[ "$status" = 0 ] && echo "layer diagram: ${#built[@]} layers agree with their target_link_libraries"
exit $status
