#!/usr/bin/env bash
# Builds and runs every benchmark of bench/ and prints the tables of bench/README.md.
# Google Benchmark suites write JSON to $OUT (default build/bench/results); the compile-time
# scripts print Markdown. Measurements only: nothing here is a test, and CI does not run it.
# Usage: bash bench/run_all.sh
# Env: OUT, BUILD (default build/bench), REPS (repetitions, default 5),
#      SKIP_COMPILE=1 to skip the compile-time scripts (they take several minutes),
#      WITH_TORCH=1 to run the PyTorch comparison too (installs python3-torch from Debian),
#      WITH_GPU=1 to build and run bench_cuda_executor (needs the CUDA Toolkit and a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build/bench}
out=${OUT:-$build/results}
reps=${REPS:-5}
bash scripts/setup.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCTPIPE_BUILD_BENCH=ON -DCTPIPE_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target bench_dispatch bench_handoff bench_efficiency bench_host_executor bench_analysis \
  bench_plan_vs_measured bench_async bench_optimizer bench_elastic bench_transformer bench_skip bench_extents \
  bench_gpt_scaling
mkdir -p "$out"
echo "# Machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(g++ --version | head -1), $(clang++ --version | head -1)"
run() {  # name, then extra flags
  local name=$1
  shift
  "$build/bench/bench_$name" --benchmark_format=json --benchmark_out="$out/$name.json" --benchmark_out_format=json \
    --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true "$@" >/dev/null
}
echo "## Dispatch (ns a task)"
run dispatch --benchmark_min_time=0.2
python3 bench/report.py dispatch "$out/dispatch.json"
echo "## Hand-off"
run handoff --benchmark_repetitions=1
python3 bench/report.py handoff "$out/handoff.json"
echo "## Skip connections: direct against relayed (ms a step, bytes a step)"
run skip
python3 bench/report.py steps "$out/skip.json"
echo "## Sequences of different lengths: mixed against padded to the longest (ms a step, bytes a step)"
run extents
python3 bench/report.py steps "$out/extents.json"
echo "## Schedule efficiency"
run efficiency --benchmark_repetitions=1 --benchmark_min_time=2
python3 bench/report.py efficiency "$out/efficiency.json"
echo "## Asynchronous pipelines and elastic freezing (ms a step)"
run async --benchmark_repetitions=1 --benchmark_min_time=2
run elastic --benchmark_repetitions=1 --benchmark_min_time=2
python3 bench/report.py steps "$out/async.json" "$out/elastic.json"
echo "## The optimizer's step (ns a parameter, one core)"
"$build/bench/bench_optimizer" --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/optimizer.json" --benchmark_out_format=json | grep -E "_median"
run host_executor
run analysis
echo "(host_executor and analysis: JSON in $out)"
echo "## Zero-bubble schedules against 1F1B on state-saving transformer-shaped blocks"
"$build/bench/bench_transformer" --benchmark_min_time=1 --benchmark_out="$out/transformer.json" \
  --benchmark_out_format=json
echo "## The GPT: pipelined step against one rank's, and the table's bound"
"$build/bench/bench_gpt_scaling" --benchmark_min_time=2 --benchmark_out="$out/gpt_scaling.json" \
  --benchmark_out_format=json
echo "## The planner: predicted against measured (host executor)"
"$build/bench/bench_plan_vs_measured" --benchmark_min_time=0.3 2>/dev/null | sed -n '/^layer figures/,$p'
if [ -n "$(command -v mpirun)" ]; then
  echo "## MPI executor (2 processes)"
  cmake --build "$build" -j"$(nproc)" --target bench_mpi
  # Open MPI as root needs the ALLOW variables; --bind-to none lets the host executor's threads
  # (the step comparison) use both cores.
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --bind-to none -np 2 "$build/bench/bench_mpi" \
    --benchmark_out="$out/mpi.json" --benchmark_out_format=json
  echo "### Skip connections between processes: direct against relayed"
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --bind-to none -np 2 "$build/bench/bench_mpi" \
    --benchmark_filter=skip --benchmark_out="$out/mpi_skip.json" --benchmark_out_format=json >/dev/null
  python3 bench/report.py steps "$out/mpi_skip.json"
  echo "## The planner on the GPT: predicted against measured"
  BUILD="$build" bash bench/gpt_plans.sh
fi
echo "## Synthesis against the ILP (CBC)"
BUILD="$build" bash bench/synthesis_ilp.sh
if [ "${SKIP_COMPILE:-0}" != 1 ]; then
  echo "## Executor code size and compile time"
  bash bench/executor_build.sh g++
  bash bench/executor_build.sh clang++
  echo "## Table compile time per schedule"
  TIMEOUT=${TIMEOUT:-120} bash bench/compile_time.sh g++ clang++
fi
if [ "${WITH_GPU:-0}" = 1 ]; then
  echo "## CUDA executor"
  cmake --build "$build" -j"$(nproc)" --target bench_cuda_executor
  rc=0
  "$build/bench/bench_cuda_executor" --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true \
    --benchmark_out="$out/cuda_executor.json" --benchmark_out_format=json || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 77 ] || exit "$rc"  # 77: no GPU here
fi
if [ "${WITH_TORCH:-0}" = 1 ]; then
  echo "## PyTorch Pipe"
  BUILD="$build" bash bench/pytorch_pipe.sh
  echo "## PyTorch on the GPT"
  BUILD="$build" bash bench/pytorch_gpt.sh
fi
