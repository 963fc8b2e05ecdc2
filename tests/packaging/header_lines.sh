#!/usr/bin/env bash
# The layout's limit: no header under <include> holds more than 600 lines. A header written before
# the limit and not yet split is listed below with the lines it had when the limit came; it may
# shrink, never grow, and leaves the list once it is within the limit (the check says so), so the
# list only gets shorter.
#   header_lines.sh <include> [<list>]   exit 0: within the limit; 1: a header over it (each named); 2: bad use
set -euo pipefail
limit=600
if [ $# -lt 1 ] || [ $# -gt 2 ] || [ ! -d "$1" ]; then
  echo "usage: header_lines.sh <include directory> [<list of headers over the limit>]" >&2
  exit 2
fi
root="$1"
list="${2:-$(dirname "$0")/header_lines_over.txt}"
declare -A allowed=()
if [ -f "$list" ]; then
  while read -r path lines; do
    [[ -z "$path" || "$path" == \#* ]] && continue
    allowed["$path"]="$lines"
  done < "$list"
fi
bad=0
checked=0
listed=${#allowed[@]}
while IFS= read -r -d '' f; do
  rel="${f#"$root"/}"
  n=$(wc -l < "$f")
  checked=$((checked + 1))
  if [ -n "${allowed[$rel]:-}" ]; then
    max="${allowed[$rel]}"
    if [ "$n" -le "$limit" ]; then
      echo "$rel: $n lines, within the limit of $limit: take it off $list" >&2
      bad=1
    elif [ "$n" -gt "$max" ]; then
      echo "$rel: $n lines, over the limit of $limit and grown past the $max it had: split it (one idea per header)" >&2
      bad=1
    fi
    unset "allowed[$rel]"
  elif [ "$n" -gt "$limit" ]; then
    echo "$rel: $n lines, over the limit of $limit: split it (one idea per header)" >&2
    bad=1
  fi
done < <(find "$root" -type f \( -name '*.hpp' -o -name '*.h' -o -name '*.cuh' \) -print0 | sort -z)
for rel in "${!allowed[@]}"; do
  echo "$rel: listed in $list but not under $root: take it off the list" >&2
  bad=1
done
[ "$bad" -eq 0 ] && echo "headers under $root: $checked within $limit lines or listed and not grown ($listed listed)"
exit "$bad"
