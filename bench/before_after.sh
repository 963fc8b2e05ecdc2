#!/usr/bin/env bash
# Side by side, for a change that touches a hot path: runs the benchmarks of two builds alternately
# (before, then after, ROUNDS times) and prints, per benchmark, the medians of the rounds, after /
# before, and before's own spread (max / min over the rounds): a ratio inside that spread is noise.
# Usage: bash bench/before_after.sh BEFORE_DIR AFTER_DIR [bench ...]
#   *_DIR: folders holding bench_<name> programs built alike (Release), e.g. two build/bench/bench.
#   bench: names without the prefix (default: dispatch handoff host_executor cuda_issue_overhead).
# Env: ROUNDS (default 3).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: bash bench/before_after.sh BEFORE_DIR AFTER_DIR [bench ...]" >&2; exit 2; }
before=$1 after=$2
shift 2
names=("$@")
((${#names[@]})) || names=(dispatch handoff host_executor cuda_issue_overhead)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for n in "${names[@]}"; do
  for d in "$before" "$after"; do
    [ -x "$d/bench_$n" ] || { echo "bench/before_after.sh: no $d/bench_$n" >&2; exit 2; }
  done
done
for r in $(seq 1 "${ROUNDS:-3}"); do
  for side in before after; do
    dir=$before
    [ "$side" = after ] && dir=$after
    for n in "${names[@]}"; do
      extra=(--benchmark_min_time=0.1)
      [ "$n" = dispatch ] && extra+=(--benchmark_filter='a_unrolled|a_table_walk' --benchmark_repetitions=3
        --benchmark_report_aggregates_only=true)
      [ "$n" = handoff ] && extra=(--benchmark_repetitions=1)
      "$dir/bench_$n" "${extra[@]}" --benchmark_format=json >"$out/${n}__${side}__$r.json" 2>/dev/null
    done
  done
done
python3 - "$out" <<'PY'
import collections, glob, json, os, statistics, sys
runs = collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob(os.path.join(sys.argv[1], "*.json")):
    suite, side, _ = os.path.basename(f)[:-5].split("__")
    for b in json.load(open(f))["benchmarks"]:
        if b.get("aggregate_name") not in (None, "median"):
            continue
        runs[(suite, b.get("run_name", b["name"]))][side].append(b["real_time"])
print("| suite | benchmark | before | after | after / before | before's spread |")
print("| --- | --- | --- | --- | --- | --- |")
for (suite, name), v in sorted(runs.items()):
    if v["before"] and v["after"]:
        b, a = statistics.median(v["before"]), statistics.median(v["after"])
        print(f"| {suite} | {name} | {b:.4g} | {a:.4g} | {a / b:.3f} | {max(v['before']) / min(v['before']):.3f} |")
PY
