#!/usr/bin/env bash
# Compile time and peak memory of generating + verifying + analysing a table at compile time, per
# schedule and size.
# Usage: bench/compile_time.sh [compiler ...]   (default: g++ clang++)
# Env: SIZES="schedule:p:m:v ..." (schedule: naive, gpipe, 1f1b, interleaved; default below),
#      TIMEOUT seconds per compile (default 600).
# Prints a Markdown table. Uses raised constexpr limits (what -DCTPIPE_LARGE_CONSTEXPR=ON adds),
# so sizes beyond the default limits can be measured; "limit" means that size needs them.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
compilers=("$@")
((${#compilers[@]})) || compilers=(g++ clang++)
default_sizes=""
for kind in naive gpipe 1f1b interleaved; do
  default_sizes+=" $kind:4:8:2 $kind:8:32:2 $kind:16:64:2 $kind:32:128:2"
done
sizes=${SIZES:-$default_sizes}
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
    IFS=: read -r kind p m v <<<"$size"
    case "$kind" in
      naive) call="naive($p, $m)"; vv=1 ;;
      gpipe) call="gpipe($p, $m)"; vv=1 ;;
      1f1b) call="one_f_one_b($p, $m)"; vv=1 ;;
      interleaved) call="interleaved($p, $m, $v)"; vv=$v ;;
      *) echo "compile_time.sh: unknown schedule '$kind' (naive, gpipe, 1f1b, interleaved)" >&2; exit 2 ;;
    esac
    src="$work/t_${kind}_${p}_${m}_${v}.cpp"
    cat >"$src" <<CPP
#include <ctpipe/ctpipe.hpp>
constexpr auto table = ctpipe::make_table<ctpipe::$call>();
static_assert(ctpipe::check<table>());
constexpr auto figures = ctpipe::analyse(table, ctpipe::cost_model{.forward = 1.0 / $vv, .backward = 2.0 / $vv});
static_assert(figures.makespan > 0);
int main() { return table.size(); }
CPP
    tasks=$( (cd "$work" && "$cxx" -std=c++20 -O0 -I"$root/include" -x c++ - -o count 2>/dev/null <<CPP
#include <ctpipe/ctpipe.hpp>
#include <cstdio>
int main() { std::printf("%d", ctpipe::generate(ctpipe::$call).size()); }
CPP
) && "$work/count")
    fits=no
    "$cxx" -std=c++20 -fsyntax-only -I"$root/include" "$src" 2>/dev/null && fits=yes
    if /usr/bin/time -o "$work/time" -f "%e %M" timeout "$timeout_s" "$cxx" -std=c++20 -fsyntax-only $big -I"$root/include" "$src" 2>/dev/null; then
      read -r secs kib <"$work/time"
      echo "| $cxx | $kind | $p | $m | $vv | $tasks | $fits | $secs | $((kib / 1024)) |"
    else
      echo "| $cxx | $kind | $p | $m | $vv | $tasks | $fits | over ${timeout_s}s or failed | - |"
    fi
  done
done
