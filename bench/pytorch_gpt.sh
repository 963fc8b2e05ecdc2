#!/usr/bin/env bash
# ctpipe's GPT (examples/gpt's model; bench/gpt_pipe.cpp) against PyTorch on the CPU, on the same
# model, parameters, token ids and OpenBLAS at one thread per rank: ctpipe on 1 rank, 1F1B and ZB-V
# on 2 ranks; PyTorch on the whole batch and with torch.distributed.pipeline.sync.Pipe (GPipe, 2
# stages, 8 chunks), each on 1 and 2 threads. Two sizes: "tiny" (the example's) and "small"
# (width 256, 4 heads, context 128, 4 blocks: matrix products dominate). 50 steps each, the
# runners alternating, ROUNDS times (default 1); prints Markdown tables (bench/report.py pipe).
# Installs what it needs from Debian (python3-torch, the set-up script's packages). Run by hand.
# Usage: bash bench/pytorch_gpt.sh [steps] [sizes...]     Env: ROUNDS, BUILD (default build/bench)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-50}
shift || true
sizes=("$@")
((${#sizes[@]})) || sizes=(tiny small)
rounds=${ROUNDS:-1}
build=${BUILD:-build/bench}
bash scripts/setup.sh >/dev/null
if ! /usr/bin/python3 -c "import torch, numpy" 2>/dev/null; then
  sudo_cmd=(); [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends python3-torch >/dev/null
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCTPIPE_BUILD_BENCH=ON -DCTPIPE_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target bench_gpt_pipe -j"$(nproc)" >/dev/null
bin="$build/bench/bench_gpt_pipe"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  for size in "${sizes[@]}"; do
    "$bin" --size "$size" --dump "$work/$size.bin" --steps "$steps"
    for runner in seq 1f1b zb-v; do "$bin" --size "$size" --runner "$runner" --steps "$steps"; done
    for t in 1 2; do
      for runner in seq pipe; do
        OPENBLAS_NUM_THREADS=$t /usr/bin/python3 bench/pytorch_gpt.py "$work/$size.bin" --runner "$runner" \
          --steps "$steps" --threads "$t" --size "$size" 2>/dev/null
      done
    done
  done
done | tee "$work/results.jsonl" >&2
/usr/bin/python3 bench/report.py pipe "$work/results.jsonl"
