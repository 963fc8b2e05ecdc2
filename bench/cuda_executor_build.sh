#!/usr/bin/env bash
# Compile time and peak memory of one CUDA executor (on the do-nothing backend of
# bench/null_backend.hpp, so no CUDA is needed), 1F1B p = 2 at 16 to 4,096 tasks, unrolled and
# table walk, against the same translation unit without the executor.
# Usage: bash bench/cuda_executor_build.sh [compiler]   (default g++; -O2)
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=${1:-g++}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/tu.cpp" <<'CPP'
#include "null_backend.hpp"
#include <vector>
#ifdef MICROBATCHES
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, MICROBATCHES)>();
using executor = ctpipe::cuda::basic_executor<table, null_device::net, ctpipe::partition<null_device::net, 2>(),
                                              null_device::empty_loss, 0, ctpipe::dispatch::DISPATCH, null_device::null_backend>;
void step(null_device::net& m, null_device::empty_loss& l) {
  executor exec(m, l);
  std::vector<null_device::empty_layer::input_type> in(MICROBATCHES);
  std::vector<null_device::empty_loss::target_type> tg(MICROBATCHES);
  exec.enqueue(in, tg);
}
#endif
CPP
measure() {  # label, then flags
  local label=$1
  shift
  /usr/bin/time -f "%e %M" -o "$dir/t" "$cxx" -std=c++20 -O2 -Iinclude -Ibench "$@" -c "$dir/tu.cpp" -o "$dir/tu.o"
  read -r secs kb < "$dir/t"
  printf '| %s | %s | %s | %d |\n' "$label" "$secs" "$((kb / 1024))" "$(size -A "$dir/tu.o" | awk '/^\.text/ {t += $2} END {print t}')"
}
echo "| $cxx: tasks, dispatch | seconds | peak MB | .text bytes |"
echo "| --- | --- | --- | --- |"
measure "headers only"
for m in 2 8 32 128 512; do
  for d in unrolled table_walk; do
    [ "$m" = 512 ] && [ "$d" = unrolled ] && continue  # automatic never unrolls beyond 1,024 tasks
    measure "$((8 * m)), $d" -DMICROBATCHES=$m -DDISPATCH=$d
  done
done
