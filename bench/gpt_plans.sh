#!/usr/bin/env bash
# The planner on the GPT (bench/README.md, "The planner on the GPT"): examples/gpt measures its own
# layers and writes the planner's model file; `ctpipe plan` reads it and lists the best plans for 2
# devices and a batch of 16 sequences; bench_gpt_plans (2 processes) predicts 13 plans from the same
# file and measures each, and prints the table and the rank correlation. Run by hand (about 2
# minutes after the build); bench/run_all.sh runs it too.
# Usage: bash bench/gpt_plans.sh      Env: BUILD (default build/bench)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build/bench}
bash scripts/setup.sh >/dev/null
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCTPIPE_BUILD_BENCH=ON -DCTPIPE_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target gpt ctpipe_explorer bench_gpt_plans -j"$(nproc)" >/dev/null
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$build/bin/gpt" --write-model "$work/gpt_model.json"
"$build/bin/ctpipe" plan "$work/gpt_model.json" --devices 2 --batch 16 --top 8
# Open MPI as root needs its two ALLOW variables; --bind-to none lets process 0's threads (the
# host executor's plans) use both cores.
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 \
  mpirun --bind-to none -np 2 "$build/bench/bench_gpt_plans" --model "$work/gpt_model.json" 2>&1 |
  sed -n '/^model file/,$p'
