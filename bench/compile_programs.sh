#!/usr/bin/env bash
# What ctpipe costs a user's build: wall time, CPU time and peak memory of the compiler for whole
# programs (not tables: compile_time.sh measures those), and with g++ where the time goes
# (-ftime-report: parsing, template instantiation, constant evaluation, optimisation and code).
# Usage: bench/compile_programs.sh [compiler ...]   (default: g++ clang++; nvcc for the nvcc unit)
# Env: UNITS  which programs (default below):
#          readme       the README's first program, as a user pastes it
#          quickstart   examples/quickstart.cpp
#          executors:N  one translation unit of the README's model with N host executors (N of 1F1B,
#                       GPipe, interleaved, ZB-H1, ZB-H2, ZB-V, DualPipeV, naive at 4 ranks), each
#                       stepped: what one more executor costs
#          gpt          examples/gpt/schedules_1f1b.cpp (the GPT at 1, 2 and 4 ranks; needs cblas.h)
#          nvcc         tests/packaging/nvcc/executors.cu under nvcc (host and CUDA executors)
#      ROOT   the ctpipe tree whose headers are measured (default: this one; another checkout's
#             path measures its headers with the same programs: before and after, side by side)
#      FLAGS  compile flags (default: -O2)
# Prints a Markdown table; "-" where a phase is not reported (clang, nvcc).
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
root="${ROOT:-$here}"
compilers=("$@")
((${#compilers[@]})) || compilers=(g++ clang++)
units=${UNITS:-"readme quickstart executors:1 executors:2 executors:4 executors:8 gpt nvcc"}
flags=${FLAGS:--O2}
[ -f "$root/include/ctpipe/ctpipe.hpp" ] || { echo "compile_programs.sh: no ctpipe headers under $root" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The README's first ```cpp block.
readme_source() {
  awk '/^```cpp$/ {on = 1; next} on && /^```$/ {exit} on {print}' "$root/README.md" >"$work/readme.cpp"
  [ -s "$work/readme.cpp" ] || { echo "compile_programs.sh: no \`\`\`cpp block in $root/README.md" >&2; exit 2; }
  echo "$work/readme.cpp"
}

# N host executors of the README's model, one schedule each.
executors_source() {
  local n=$1 src="$work/executors_$1.cpp"  # n: 1 to 8 (checked with the programs' names)
  local schedules=("one_f_one_b(4, 8)" "gpipe(4, 8)" "interleaved(4, 8, 2)" "zb_h1(4, 8)" "zb_h2(4, 8)"
                   "zb_v(4, 8)" "dualpipe_v(4, 8)" "naive(4, 8)")
  {
    echo '#include <ctpipe/ctpipe.hpp>'
    echo '#include <ctpipe/layers/dense.hpp>'
    echo '#include <cstdio>'
    echo '#include <vector>'
    echo 'using hidden = ctpipe::layers::dense<8, 32, 32>;'
    echo 'using net = ctpipe::model<ctpipe::layers::dense<8, 16, 32>, hidden, hidden, hidden, hidden, hidden, hidden,'
    echo '                          ctpipe::layers::dense<8, 32, 4, ctpipe::layers::activation::none>>;'
    echo 'using loss = ctpipe::layers::softmax_cross_entropy<8, 4>;'
    echo 'template <auto Schedule>'
    echo 'double run(net& model, loss& l) {'
    echo '  constexpr auto table = ctpipe::make_table<Schedule>();'
    echo '  ctpipe::host_executor<table, net, ctpipe::partition<net, table.stages()>(), loss> exec(model, l);'
    echo '  std::vector<net::input_type> x(8);'
    echo '  std::vector<loss::target_type> y(8);'
    echo '  return exec.step(x, y)[0];'
    echo '}'
    echo 'int main() {'
    echo '  net model;'
    echo '  loss l;'
    echo '  double s = 0;'
    for ((i = 0; i < n; ++i)); do echo "  s += run<ctpipe::${schedules[i]}>(model, l);"; done
    echo '  std::printf("%f\n", s);'
    echo '}'
  } >"$src"
  echo "$src"
}

# One compile: prints "wall cpu peak_mib parse instantiate constexpr generate" (phases: g++ only).
measure() {
  local cxx=$1 src=$2
  shift 2
  local report=()
  "$cxx" --version 2>/dev/null | grep -q "Free Software Foundation" && report=(-ftime-report)  # g++
  if ! /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$cxx" "$@" "${report[@]}" -c "$src" -o "$work/out.o" \
    2>"$work/err"; then
    echo "compile_programs.sh: $cxx failed on $src:" >&2
    grep -v '^ \|^Time variable\|^$' "$work/err" | head -5 >&2
    return 1
  fi
  read -r wall user sys peak <"$work/time"
  local cpu parse inst cx gen
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN {printf "%.1f", u + s}')
  # A phase's wall seconds: its line reads "usr (%) sys (%) wall (%) memory (%)".
  phase() {
    awk -v k="$1" -F: 'index($1, k) == 2 {gsub(/\( *[0-9]+%\)/, "", $2); split($2, a, " "); printf "%.1f", a[3]; found = 1}
                       END {if (!found) printf "-"}' "$work/err"
  }
  parse=$(phase "phase parsing") inst=$(phase "template instantiation") cx=$(phase "constant expression evaluation")
  gen=$(phase "phase opt and generate")
  echo "$wall $cpu $((peak / 1024)) $parse $inst $cx $gen"
}

for unit in $units; do
  case "$unit" in
    readme | quickstart | executors:[1-8] | gpt | nvcc) ;;
    *) echo "compile_programs.sh: unknown program '$unit' (readme, quickstart, executors:1 to executors:8, gpt, nvcc)" >&2; exit 2 ;;
  esac
done
echo "| compiler | program | flags | wall s | CPU s | peak MiB | parsing s | instantiation s | constant evaluation s | optimisation and code s |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for unit in $units; do
  extra=()
  case "$unit" in
    readme) src=$(readme_source) || exit 2 ;;
    quickstart) src="$root/examples/quickstart.cpp" ;;
    executors:*) src=$(executors_source "${unit#executors:}") || exit 2 ;;
    gpt)
      src="$root/examples/gpt/schedules_1f1b.cpp"
      extra=(-I"$root/examples/gpt")
      # cblas.h: where Debian's BLAS packages put it
      for d in /usr/include /usr/include/x86_64-linux-gnu /usr/include/aarch64-linux-gnu \
        /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/aarch64-linux-gnu/openblas-pthread /usr/include/openblas; do
        [ -f "$d/cblas.h" ] && { extra+=(-I"$d"); break; }
      done
      ;;
    nvcc) src="$root/tests/packaging/nvcc/executors.cu" ;;
  esac
  [ -f "$src" ] || { echo "compile_programs.sh: no $src" >&2; exit 2; }
  if [ "$unit" = nvcc ]; then
    command -v nvcc >/dev/null || { echo "| nvcc | nvcc | $flags | (no nvcc here) | | | | | | |"; continue; }
    cxxs=(nvcc)
    extra=(-std=c++20 -I"$root/tests")  # as the nvcc test builds it
  else
    cxxs=("${compilers[@]}")
    extra+=(-std=c++20)
  fi
  for cxx in "${cxxs[@]}"; do
    # shellcheck disable=SC2086 # FLAGS is a list of flags
    if r=$(measure "$cxx" "$src" $flags -I"$root/include" "${extra[@]}"); then
      read -r wall cpu peak parse inst cx gen <<<"$r"
      echo "| $cxx | $unit | $flags | $wall | $cpu | $peak | $parse | $inst | $cx | $gen |"
    else
      echo "| $cxx | $unit | $flags | failed | | | | | | |"
    fi
  done
done
