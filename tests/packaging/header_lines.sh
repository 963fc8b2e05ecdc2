#!/usr/bin/env bash
# The layout's limit: no header under <include> holds more than 600 lines (one idea per header).
#   header_lines.sh <include>   exit 0: every header within the limit; 1: a header over it (each named); 2: bad use
set -euo pipefail
limit=600
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: header_lines.sh <include directory>" >&2
  exit 2
fi
root="$1"
bad=0
checked=0
while IFS= read -r -d '' f; do
  rel="${f#"$root"/}"
  n=$(wc -l < "$f")
  checked=$((checked + 1))
  if [ "$n" -gt "$limit" ]; then
    echo "$rel: $n lines, over the limit of $limit: split it (one idea per header)" >&2
    bad=1
  fi
done < <(find "$root" -type f \( -name '*.hpp' -o -name '*.h' -o -name '*.cuh' \) -print0 | sort -z)
[ "$bad" -eq 0 ] && echo "headers under $root: $checked, each within $limit lines"
exit "$bad"
