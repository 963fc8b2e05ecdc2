#!/usr/bin/env bash
# Instructions per task of the host executor under callgrind: two table sizes, two step counts
# each; the differences cancel set-up and the fixed cost of a step.
# Usage: bash bench/instructions.sh [build-dir]   (needs valgrind; builds bench_instructions)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build/bench}"
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCTPIPE_BUILD_BENCH=ON -DCTPIPE_BUILD_TESTS=OFF >/dev/null
cmake --build "$dir" --target bench_instructions >/dev/null
bin="$dir/bench/bench_instructions"
count() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" "$2" 2>&1 | sed -n 's/.*Collected : //p'; }
a1=$(count 0 100); a2=$(count 0 200); b1=$(count 1 100); b2=$(count 1 200)
small=$(( (a2 - a1) / 100 )); large=$(( (b2 - b1) / 100 ))
echo "instructions per step: 128 tasks $small, 1024 tasks $large"
echo "instructions per task (marginal): $(( (large - small) / 896 ))"
