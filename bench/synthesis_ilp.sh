#!/usr/bin/env bash
# How close synthesis comes to the best order (bench/README.md, "Synthesis against the ILP"): the
# Zero Bubble paper's ILP solved by CBC for p <= 3, m <= 6 (64 cases: F:I:W 1:1:1, 1:2:1, 2:3:1 and
# a heavy last stage, comm 0 and 1, limits p and 2p - 1), each against `ctpipe synth`'s heuristic
# and better-of. Run by hand (a few minutes on the 2-core VM); not in CI. PLACEMENT=v (or both) runs
# the same ILP on V placement (limits 2p and 3p), which CBC closes far less often within its time.
# Usage: bash bench/synthesis_ilp.sh      Env: BUILD (default build/bench), SECONDS_PER_CASE (60), PLACEMENT (one)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build/bench}
bash scripts/setup.sh bench >/dev/null
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCTPIPE_BUILD_BENCH=ON -DCTPIPE_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target ctpipe_explorer -j"$(nproc)" >/dev/null
python3 bench/synthesis_ilp.py "$build/bin/ctpipe" --seconds "${SECONDS_PER_CASE:-60}" --placement "${PLACEMENT:-one}"
