#!/usr/bin/env bash
# Installs what is missing, then builds and runs the whole test suite with g++ and with clang++
# (-Wall -Wextra -Werror -Wpedantic), runs the host-executor tests and the quickstart under
# AddressSanitizer + UndefinedBehaviorSanitizer and under ThreadSanitizer (CMakePresets.json),
# and runs the quickstart example.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs="$(nproc)"
for cxx in g++ clang++; do
  dir="build/test-$cxx"
  echo "== $cxx"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
  cmake --build "$dir" -j"$jobs"
  (cd "$dir" && ctest --output-on-failure -j"$jobs")
done
for preset in asan tsan; do
  echo "== $preset"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j"$jobs"
  ctest --preset "$preset" -j"$jobs"
done
./build/test-g++/bin/quickstart >/dev/null && echo "quickstart: ran"
