#!/usr/bin/env bash
# ctpipe's host executor against PyTorch's GPipe (torch.distributed.pipeline.sync.Pipe) on the same
# MLP, on CPU: same layer sizes, microbatches, float32 parameters and data, same libblas for the
# matrix products. Installs what it needs from Debian (python3-torch, libblas-dev), builds
# bench_pipe_mlp, then runs both side by side, alternating, ROUNDS times (default 3), and prints a
# Markdown table. Run by hand, not by CI (python3-torch is large).
# Usage: bash bench/pytorch_pipe.sh [steps]     Env: ROUNDS, BUILD (default build/bench)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-20}
rounds=${ROUNDS:-3}
build=${BUILD:-build/bench}
need=()
/usr/bin/python3 -c "import torch, numpy" 2>/dev/null || need+=(python3-torch python3-numpy)
[ -e /usr/include/x86_64-linux-gnu/cblas.h ] || [ -e /usr/include/cblas.h ] || need+=(libblas-dev)
if ((${#need[@]})); then
  sudo_cmd=(); [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
bash scripts/setup.sh >/dev/null
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCTPIPE_BUILD_BENCH=ON -DCTPIPE_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target bench_pipe_mlp -j"$(nproc)" >/dev/null
bin="$build/bench/bench_pipe_mlp"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$bin" --dump "$work/mlp.bin"
for ((r = 1; r <= rounds; ++r)); do
  "$bin" --ranks 2 --steps "$steps"
  "$bin" --ranks 1 --steps "$steps"
  /usr/bin/python3 bench/pytorch_pipe.py "$work/mlp.bin" --steps "$steps" --threads 1 2>/dev/null
  /usr/bin/python3 bench/pytorch_pipe.py "$work/mlp.bin" --steps "$steps" --threads 2 2>/dev/null
done | tee "$work/results.jsonl" >&2
/usr/bin/python3 bench/report.py pipe "$work/results.jsonl"
