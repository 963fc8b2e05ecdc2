#!/usr/bin/env bash
# Everything of ctpipe that needs an NVIDIA GPU, in one command, with one report file.
#
#   bash scripts/gpu.sh --build   # on a machine with the CUDA 13 Toolkit and scripts/setup.sh's
#                                 # packages (no GPU needed): builds build/gpu/bundle
#   bash scripts/gpu.sh           # on the GPU machine, from the repository root with build/gpu/bundle
#                                 # carried over: runs it all, writes build/gpu/report.md (or $OUT/)
#
# The GPU machine needs the NVIDIA driver and nothing of ctpipe's dependencies: the bundle's programs
# link libstdc++ statically, and the shared libraries they need that are not the system's or CUDA's
# (Google Benchmark, Open MPI's) are carried in bundle/lib. What needs an MPI launcher (the NCCL and
# MPI device-path GPU tests) runs where `mpirun` is on the PATH, and the report says "unavailable"
# where it is not; compute-sanitizer likewise; the PyTorch comparison where python3 imports torch.
# Without a GPU it says so and exits 77.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bundle=$root/build/gpu/bundle

if [ "${1:-}" = --build ]; then
  set -e
  bash scripts/setup.sh
  command -v nvcc >/dev/null || { echo "scripts/gpu.sh --build: needs nvcc (the CUDA 13 Toolkit) on PATH" >&2; exit 2; }
  cmake -S . -B build/gpu -DCMAKE_BUILD_TYPE=Release -DCTPIPE_BUILD_BENCH=ON -DCTPIPE_BUILD_TESTS=ON \
    -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
  targets=(ctpipe_gpu_tests cuda_mlp bench_cuda_executor)
  for t in ctpipe_nccl_gpu_tests; do
    cmake --build build/gpu --target help | grep -q " $t\$" && targets+=("$t")
  done
  cmake --build build/gpu -j"$(nproc)" --target "${targets[@]}"
  rm -rf "$bundle"
  mkdir -p "$bundle/lib"
  for t in "${targets[@]}"; do
    f=$(find build/gpu -type f -name "$t" -perm -u+x | head -1)
    [ -n "$f" ] && cp "$f" "$bundle/"
  done
  # The shared libraries that are neither the C library's, the driver's nor CUDA's: carried.
  for f in "$bundle"/*; do
    [ -f "$f" ] || continue
    ldd "$f" | awk '/=> \// {print $3}' | grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvToolsExt)[.-]' |
      while read -r lib; do cp -nL "$lib" "$bundle/lib/"; done
  done
  du -sh "$bundle"
  echo "scripts/gpu.sh: built $bundle; carry build/gpu/bundle to the GPU machine and run bash scripts/gpu.sh there"
  exit 0
fi

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "scripts/gpu.sh: no NVIDIA GPU here (nvidia-smi lists none): nothing to run. Build the bundle with" \
    "'bash scripts/gpu.sh --build' and run this script on a machine with a GPU."
  exit 77
fi
[ -d "$bundle" ] || { echo "scripts/gpu.sh: no $bundle: build it first with 'bash scripts/gpu.sh --build'" >&2; exit 2; }

out=${OUT:-$root/build/gpu}
mkdir -p "$out"
report=$out/report.md
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failures=0
{
  echo "# ctpipe on a GPU: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "- device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
  echo "- CUDA: $(nvcc --version 2>/dev/null | tail -1 || echo 'nvcc not on PATH')"
  echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
} >"$report"

# run NAME COMMAND...: runs it, records its exit code and the tail of its output.
run() {
  local name=$1
  shift
  local log="$out/$name.log" rc
  "$@" >"$log" 2>&1
  rc=$?
  case $rc in
    0) echo "- $name: passed" >>"$report" ;;
    77) echo "- $name: skipped (exit 77)" >>"$report" ;;
    *)
      echo "- $name: FAILED (exit $rc)" >>"$report"
      failures=$((failures + 1))
      ;;
  esac
  { echo '  ```'; tail -n 15 "$log" | sed 's/^/  /'; echo '  ```'; } >>"$report"
}
unavailable() { echo "- $1: unavailable ($2)" >>"$report"; }

echo "## Tests and example" >>"$report"
run gpu_tests "$bundle/ctpipe_gpu_tests"
run cuda_mlp "$bundle/cuda_mlp"
if [ -x "$bundle/ctpipe_nccl_gpu_tests" ] && command -v mpirun >/dev/null; then
  run nccl_np1 mpirun -np 1 "$bundle/ctpipe_nccl_gpu_tests"
else
  unavailable nccl_np1 "no mpirun on this machine, or the bundle has no NCCL test"
fi
echo >>"$report"
echo "## compute-sanitizer" >>"$report"
if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    run "sanitizer_$tool" compute-sanitizer --tool "$tool" --error-exitcode 1 "$bundle/ctpipe_gpu_tests"
  done
else
  unavailable compute-sanitizer "not on PATH"
fi
echo >>"$report"
echo "## Benchmark" >>"$report"
run bench_cuda_executor "$bundle/bench_cuda_executor" --benchmark_out="$out/cuda_executor.json" \
  --benchmark_out_format=json --benchmark_min_time=0.2
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "- PyTorch: $(python3 -c 'import torch; print(torch.__version__)') (its comparison: bench/pytorch_pipe.sh)" >>"$report"
else
  unavailable pytorch "python3 cannot import torch with CUDA"
fi
echo >>"$report"
echo "failures: $failures" >>"$report"
cat "$report"
[ "$failures" = 0 ]
