#!/usr/bin/env bash
# Installs what is missing, builds the quickstart example and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build/quickstart -DCMAKE_BUILD_TYPE=Release -DCTPIPE_BUILD_TESTS=OFF >/dev/null
cmake --build build/quickstart --target quickstart ctpipe_explorer -j"$(nproc)"
./build/quickstart/bin/quickstart
