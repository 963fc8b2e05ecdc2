#!/usr/bin/env bash
# Compile time and peak memory of generating + verifying + analysing a table at compile time, per
# schedule and size.
# Usage: bench/compile_time.sh [compiler ...]   (default: g++ clang++)
# Env: SIZES="schedule:p:m:v ..." (schedule: any the explorer knows, by its explorer name; v is
#      used by the chunked ones: interleaved, looped_bfs, interleaved_zero_bubble; default below;
#      "every:p:m:v" for every schedule at one size),
#      TIMEOUT seconds per compile (default 600).
# Prints a Markdown table. A size that does not fit the compiler's default constexpr limits ("no")
# is timed with them raised (what -DCTPIPE_LARGE_CONSTEXPR=ON adds), so it can be measured too.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
compilers=("$@")
((${#compilers[@]})) || compilers=(g++ clang++)
# The schedules: the explorer's own list (tools/explorer.cpp, schedule_names), so that a schedule
# added there is measured here too.
mapfile -t known < <(sed -n '/schedule_names =/,/;/p' "$root/tools/explorer.cpp" | grep -o '"[^"]*"' | tr -d '"' |
  tr -d '\n' | sed 's/ or /, /' | tr ',' '\n' | tr -d ' ' | grep -v '^$')
((${#known[@]} >= 13)) || { echo "compile_time.sh: could not read the explorer's schedule names" >&2; exit 2; }
default_sizes=""
for kind in "${known[@]}"; do
  default_sizes+=" $kind:4:8:2 $kind:8:32:2 $kind:16:64:2 $kind:32:128:2"
done
sizes=${SIZES:-$default_sizes}
# SIZES="every:p:m:v": every schedule at that size.
if [[ "$sizes" == every:* ]]; then
  size=${sizes#every:}
  sizes=""
  for kind in "${known[@]}"; do sizes+=" $kind:$size"; done
fi
timeout_s=${TIMEOUT:-600}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Each size's call, after checking its name. (A here-string, not a pipe: grep -q stops reading at
# the first match, and under pipefail the writer's SIGPIPE would make a known name look unknown,
# now and then.)
calls=() vs=()
for size in $sizes; do
  IFS=: read -r kind p m v <<<"$size"
  if ! grep -qx "$kind" <<<"$(printf '%s\n' "${known[@]}")"; then
    echo "compile_time.sh: unknown schedule '$kind' (${known[*]})" >&2
    exit 2
  fi
  # The explorer's names are the C++ generators' names, but for 1f1b (one_f_one_b).
  fn=$kind
  [ "$kind" = 1f1b ] && fn=one_f_one_b
  case "$kind" in
    interleaved | looped_bfs | interleaved_zero_bubble) calls+=("$fn($p, $m, $v)"); vs+=("$v") ;;
    *) calls+=("$fn($p, $m)"); vs+=(1) ;;
  esac
done
# Every size's task count, from one program (generated at run time: any size).
{
  echo '#include <ctpipe/schedules.hpp>'
  echo '#include <cstdio>'
  echo 'int main() {'
  for call in "${calls[@]}"; do echo "  std::printf(\"%d\\n\", ctpipe::generate(ctpipe::$call).size());"; done
  echo '}'
} >"$work/count.cpp"
"${compilers[0]}" -std=c++20 -O0 -I"$root/include" "$work/count.cpp" -o "$work/count" 2>/dev/null ||
  { echo "compile_time.sh: could not build the task counter" >&2; exit 2; }
mapfile -t counts < <("$work/count")
echo "| compiler | schedule | p | m | v | tasks | default limits | seconds | peak MiB |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for cxx in "${compilers[@]}"; do
  case "$("$cxx" --version | head -1)" in
    *clang*) big="-fconstexpr-steps=2147483647" ;;
    *) big="-fconstexpr-ops-limit=68719476736 -fconstexpr-loop-limit=2147483647" ;;
  esac
  i=0
  for size in $sizes; do
    IFS=: read -r kind p m v <<<"$size"
    call=${calls[$i]} vv=${vs[$i]} tasks=${counts[$i]}
    i=$((i + 1))
    src="$work/t_${kind}_${p}_${m}_${v}.cpp"
    cat >"$src" <<CPP
#include <ctpipe/schedules.hpp>
constexpr auto table = ctpipe::make_table<ctpipe::$call>();
static_assert(ctpipe::check<table>());
constexpr auto figures = ctpipe::analyse(table, ctpipe::cost_model{.forward = 1.0 / $vv, .backward = 2.0 / $vv});
static_assert(figures.makespan > 0);
int main() { return table.size(); }
CPP
    # Timed within the compiler's default constexpr limits; where it does not fit, timed again with
    # them raised (the limits change what compiles, not the work).
    fits=yes
    if ! /usr/bin/time -o "$work/time" -f "%e %M" timeout "$timeout_s" "$cxx" -std=c++20 -fsyntax-only \
      -I"$root/include" "$src" 2>/dev/null; then
      fits=no
      /usr/bin/time -o "$work/time" -f "%e %M" timeout "$timeout_s" "$cxx" -std=c++20 -fsyntax-only $big \
        -I"$root/include" "$src" 2>/dev/null || fits=failed
    fi
    if [ "$fits" != failed ]; then
      read -r secs kib <"$work/time"
      echo "| $cxx | $kind | $p | $m | $vv | $tasks | $fits | $secs | $((kib / 1024)) |"
    else
      echo "| $cxx | $kind | $p | $m | $vv | $tasks | no | over ${timeout_s}s or failed | - |"
    fi
  done
done
