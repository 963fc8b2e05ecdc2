#!/usr/bin/env bash
# Code size and compile time of the host executor, per dispatch strategy (unrolled, table_walk) and
# table size: one translation unit that instantiates the executor for 1F1B on one rank with m
# microbatches (2m near-empty tasks) and runs a step, compiled with -O2.
# Usage: bench/executor_build.sh [compiler]   (default g++)   Env: SIZES="m ..." (default below)
# Prints a Markdown table: seconds, peak MiB, bytes of .text in the object, and bytes a task
# (the .text growth from the smallest size, divided by the added tasks).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cxx=${1:-g++}
sizes=${SIZES:-"8 32 128 512 2048"}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "| compiler | dispatch | tasks | seconds | peak MiB | .text bytes | bytes a task |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for strategy in unrolled table_walk; do
  base_text="" base_tasks=""
  for m in $sizes; do
    src="$work/e_${strategy}_$m.cpp"
    cat >"$src" <<CPP
#include <ctpipe/ctpipe.hpp>
#include <array>
#include <cstdint>
#include <vector>
struct tick {
  using input_type = std::array<std::uint64_t, 1>;
  using output_type = std::array<std::uint64_t, 1>;
  static constexpr double cost = 1.0;
  void forward(const input_type& x, output_type& y) const { y[0] = x[0] + 1; asm volatile("" : : "r"(&y) : "memory"); }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) const {
    dx[0] = dy[0] + 1; asm volatile("" : : "r"(&dx) : "memory");
  }
};
struct loss {
  using target_type = int;
  double operator()(const tick::output_type& y, int, tick::output_type& dy) const { dy[0] = y[0]; return 0.0; }
};
using net = ctpipe::model<tick>;
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(1, $m)>();
double run(std::vector<tick::input_type>& in, std::vector<int>& t) {
  net n; loss l;
  ctpipe::host_executor<table, net, ctpipe::partition<net, 1>(), loss, ctpipe::dispatch::$strategy> e(n, l);
  return e.step(in, t)[0];
}
CPP
    if /usr/bin/time -o "$work/time" -f "%e %M" "$cxx" -std=c++20 -O2 -I"$root/include" -c "$src" -o "$work/e.o" 2>"$work/err"; then
      read -r secs kib <"$work/time"
      text=$(size -A "$work/e.o" | awk '$1 ~ /^\.text/ {s += $2} END {print s}')
      tasks=$((2 * m))
      per="-"
      if [ -z "$base_text" ]; then base_text=$text base_tasks=$tasks
      else per=$(awk -v a="$text" -v b="$base_text" -v n="$tasks" -v k="$base_tasks" 'BEGIN {printf "%.1f", (a - b) / (n - k)}'); fi
      echo "| $cxx | $strategy | $tasks | $secs | $((kib / 1024)) | $text | $per |"
    else
      echo "| $cxx | $strategy | $((2 * m)) | failed: $(head -c 200 "$work/err") | - | - | - |"
    fi
  done
done
