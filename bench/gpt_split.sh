#!/usr/bin/env bash
# The planner's split against partition<>'s on the GPT example (bench/README.md, "The planner's
# split on the GPT"): examples/gpt measures its layers and writes the planner's model file; `ctpipe
# plan --emit-header` writes the best 1F1B plan on 2 ranks at M microbatches of a 16-sequence step;
# bench_gpt_split is built with that header and measures, side by side (10 repetitions of at least a second, interleaved),
# one rank and 1F1B on 2 ranks with partition<>'s stages, with partition<> counting the loss, and
# with the planner's; last, each 2-rank step against the table's bound, (M + 1) / 2M of one rank's.
# Run by hand (about a minute after the build).
# Usage: bash bench/gpt_split.sh      Env: BUILD (default build/bench), M (default 16), SAVE=1 (copy
# the emitted header to bench/samples/gpt_split_plan.hpp, which CI compiles)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build/bench}
m=${M:-16}
bash scripts/setup.sh >/dev/null
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCTPIPE_BUILD_BENCH=ON -DCTPIPE_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target gpt ctpipe_explorer -j"$(nproc)" >/dev/null
header="$(pwd)/$build/gpt_split_plan.hpp"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$build/bin/gpt" --write-model "$work/gpt_model.json"
"$build/bin/ctpipe" plan "$work/gpt_model.json" --devices 2 --batch 16 --ranks 2 --schedules 1f1b \
  --microbatches "$m" --no-recompute --top 1 --emit-header "$header" --namespace gpt_split
[ "${SAVE:-0}" = 1 ] && cp "$header" bench/samples/gpt_split_plan.hpp
cmake -S . -B "$build" -DCTPIPE_GPT_SPLIT_HEADER="$header" >/dev/null
cmake --build "$build" --target bench_gpt_split -j"$(nproc)" >/dev/null
"$build/bench/bench_gpt_split" --benchmark_repetitions=10 --benchmark_enable_random_interleaving=true \
  --benchmark_min_time=1 --benchmark_format=json --benchmark_out="$work/split.json" >/dev/null
python3 - "$work/split.json" "$m" <<'PY'
import json, statistics, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
m = int(sys.argv[2])
by = {}
for r in runs:
    if r.get("run_type") == "iteration":
        by.setdefault(r["run_name"].removesuffix("/real_time"), []).append(r)
one = statistics.median(x["real_time"] for x in by["gpt_split/one_rank"])
bound = (m + 1) / (2 * m) * one
print(f"M = {m}: one rank {one:.3f} ms (median of 10); 1F1B p = 2 bound {bound:.3f} ms")
print(f"{'split':<24}{'layers on stage 0':>18}{'step (ms)':>11}{'spread':>15}{'/ bound':>9}{'busiest / mean':>16}")
for name in ("gpt_split/1f1b_p2/partition", "gpt_split/1f1b_p2/partition_with_loss", "gpt_split/1f1b_p2/planner"):
    t = [x["real_time"] for x in by[name]]
    med = statistics.median(t)
    bal = statistics.median(x["busiest_over_mean"] for x in by[name])
    print(f"{name.split('/')[-1]:<24}{int(by[name][0]['first_stage_layers']):>18}{med:>11.3f}"
          f"{f'{min(t):.2f}-{max(t):.2f}':>15}{med / bound:>9.3f}{bal:>16.3f}")
PY
