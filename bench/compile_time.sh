#!/usr/bin/env bash
# Compile time and peak memory of generating + verifying + analysing a table at compile time.
# Usage: bench/compile_time.sh [compiler ...]   (default: g++ clang++)
# Env: SIZES="p:m:v ..." (default below), TIMEOUT seconds per compile (default 600).
# Prints a Markdown table. Uses raised constexpr limits (what -DCTPIPE_LARGE_CONSTEXPR=ON adds),
# so sizes beyond the default limits can be measured; "limit" means that size needs them.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
compilers=("$@")
((${#compilers[@]})) || compilers=(g++ clang++)
sizes=${SIZES:-"4:8:2 8:32:2 16:64:2 32:128:2 64:256:2 64:512:2"}
timeout_s=${TIMEOUT:-600}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "| compiler | schedule | p | m | v | tasks | default limits | seconds | peak MiB |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for cxx in "${compilers[@]}"; do
  case "$("$cxx" --version | head -1)" in
    *clang*) big="-fconstexpr-steps=2147483647" ;;
    *) big="-fconstexpr-ops-limit=68719476736 -fconstexpr-loop-limit=2147483647" ;;
  esac
  for size in $sizes; do
    IFS=: read -r p m v <<<"$size"
    src="$work/t_${p}_${m}_${v}.cpp"
    cat >"$src" <<CPP
#include <ctpipe/ctpipe.hpp>
constexpr auto table = ctpipe::make_table<ctpipe::interleaved($p, $m, $v)>();
static_assert(ctpipe::check<table>());
constexpr auto figures = ctpipe::analyse(table, ctpipe::cost_model{.forward = 1.0 / $v, .backward = 2.0 / $v});
static_assert(figures.makespan > 0);
int main() { return table.size(); }
CPP
    tasks=$( (cd "$work" && "$cxx" -std=c++20 -O0 -I"$root/include" -x c++ - -o count 2>/dev/null <<CPP
#include <ctpipe/ctpipe.hpp>
#include <cstdio>
int main() { std::printf("%d", ctpipe::generate(ctpipe::interleaved($p, $m, $v)).size()); }
CPP
) && "$work/count")
    fits=no
    "$cxx" -std=c++20 -fsyntax-only -I"$root/include" "$src" 2>/dev/null && fits=yes
    if /usr/bin/time -o "$work/time" -f "%e %M" timeout "$timeout_s" "$cxx" -std=c++20 -fsyntax-only $big -I"$root/include" "$src" 2>/dev/null; then
      read -r secs kib <"$work/time"
      echo "| $cxx | interleaved | $p | $m | $v | $tasks | $fits | $secs | $((kib / 1024)) |"
    else
      echo "| $cxx | interleaved | $p | $m | $v | $tasks | $fits | over ${timeout_s}s or failed | - |"
    fi
  done
done
