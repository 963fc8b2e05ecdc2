#!/usr/bin/env bash
# bench/compile_time.sh over every schedule the explorer knows, at one small size: each table must
# compile within the default constexpr limits (no row "failed", none missing).
# Usage: bench_compile_time.sh SOURCE_DIR COMPILER
set -uo pipefail
out=$(SIZES=every:4:8:2 TIMEOUT=300 bash "$1/bench/compile_time.sh" "$2") || { echo "$out"; exit 1; }
echo "$out"
rows=$(grep -c "^| $2 |" <<<"$out")
known=$(sed -n '/schedule_names =/,/;/p' "$1/tools/explorer.cpp" | grep -o '"[^"]*"' | tr -d '"\n' | tr ',' '\n' | sed 's/ or /\n/' | grep -c '[a-z]')
echo "$rows rows for $known schedules"
[ "$rows" = "$known" ] && ! grep -q "failed\|| no |" <<<"$out"
