#!/usr/bin/env bash
# Everything of ctpipe that needs an NVIDIA GPU, in one command, with one report file.
#
#   bash scripts/gpu.sh --build   # on a machine with the CUDA 13 Toolkit and scripts/setup.sh's
#                                 # packages (no GPU needed): builds build/gpu/bundle, and the same
#                                 # packed as build/gpu/bundle.tgz (a fifth of the size) to carry
#   bash scripts/gpu.sh           # on the GPU machine, from the repository root with build/gpu/bundle
#                                 # or build/gpu/bundle.tgz carried over (the archive is unpacked
#                                 # where the folder is missing): runs it all, writes
#                                 # build/gpu/report.md (or $OUT/)
#   bash scripts/gpu.sh SECTION.. # only those sections: tests (the GPU tests and the examples), gpt
#                                 # (the GPT against PyTorch), bench, sanitizer
#
# The GPU machine needs the NVIDIA driver and nothing of ctpipe's dependencies: the bundle's programs
# link libstdc++ statically, and the shared libraries they need that are not the system's or CUDA's
# (Google Benchmark's, Open MPI's) are carried in bundle/lib. Open MPI itself is carried too
# (bundle/openmpi: its launcher, components and help files, relocated with OPAL_PREFIX) for the
# tests that need an MPI launcher (the NCCL test under mpirun and the MPI executor's device path); the
# one-process NCCL test needs none. compute-sanitizer runs where it is on the PATH (the report says
# "unavailable" where not), the PyTorch comparison where python3 imports torch.
# Without a GPU it says so and exits 77.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bundle=$root/build/gpu/bundle

if [ "${1:-}" = --build ]; then
  set -e
  bash scripts/setup.sh
  command -v nvcc >/dev/null || { echo "scripts/gpu.sh --build: needs nvcc (the CUDA 13 Toolkit) on PATH" >&2; exit 2; }
  cmake -S . -B build/gpu -DCMAKE_BUILD_TYPE=Release -DCTPIPE_BUILD_BENCH=ON -DCTPIPE_BUILD_TESTS=ON -DCTPIPE_GPT_GPU_GPT2=ON \
    -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
  targets=(ctpipe_gpu_tests ctpipe_gpu_optimizer_tests ctpipe_gpu_device_layer_tests cuda_mlp gpt_gpu gpt_gpu_gpt2
    bench_cuda_executor bench_pipe_mlp)
  known=$(cmake --build build/gpu --target help)  # (not piped into grep -q: pipefail would see SIGPIPE)
  for t in ctpipe_nccl_gpu_solo ctpipe_nccl_gpu_tests; do
    grep -q " $t\$" <<<"$known" && targets+=("$t")
  done
  # (gpt_gpu_gpt2 last and alone: each of its two nvcc units takes about 13 GB at GPT-2's shape.)
  first=()
  for t in "${targets[@]}"; do [ "$t" = gpt_gpu_gpt2 ] || first+=("$t"); done
  cmake --build build/gpu -j"$(nproc)" --target "${first[@]}"
  cmake --build build/gpu -j1 --target gpt_gpu_gpt2
  rm -rf "$bundle"
  mkdir -p "$bundle/lib"
  for t in "${targets[@]}"; do
    f=$(find build/gpu -type f -name "$t" -perm -u+x | head -1)
    [ -n "$f" ] && cp "$f" "$bundle/"
  done
  # Open MPI, relocatable: OPAL_PREFIX=bundle/openmpi finds its components and help files under the
  # same relative paths as under /usr.
  if command -v mpirun >/dev/null; then
    ompi_lib=$(dirname "$(dirname "$(find /usr/lib -path '*/openmpi/lib/openmpi*/mca_pml_ob1.so' | head -1)")")
    rel=${ompi_lib#/usr/}
    mkdir -p "$bundle/openmpi/bin" "$bundle/openmpi/$rel" "$bundle/openmpi/share"
    cp -rL "$ompi_lib/." "$bundle/openmpi/$rel/"
    cp -r /usr/share/openmpi "$bundle/openmpi/share/"
    cp -L "$(command -v mpirun)" "$bundle/openmpi/bin/mpirun"
    cp -L "$(command -v orted)" "$bundle/openmpi/bin/orted"
  fi
  # The shared libraries that are neither the C library's, the driver's nor CUDA's: carried (those of
  # the programs, and of Open MPI's launcher and components).
  find "$bundle" -type f \( -perm -u+x -o -name '*.so*' \) | while read -r f; do
    ldd "$f" 2>/dev/null | awk '/=> \// {print $3}'
  done | sort -u | grep -Ev "^$bundle/|/(libc|libm|libdl|librt|libpthread|ld-linux|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvToolsExt)[.-]" |
    while read -r lib; do cp -nL "$lib" "$bundle/lib/"; done
  # The GPT example's text (the GPU machine has no fortunes package): Debian's songs and poems where
  # they are installed, else the repository's small sample.
  text=/usr/share/games/fortunes/songs-poems
  [ -f "$text" ] || text=tests/data/gpt_text.txt
  cp "$text" "$bundle/gpt_text.txt"
  # What the bundle was built from (the GPU machine's copy of the tree may have no git history).
  { git rev-parse --short HEAD 2>/dev/null || echo unknown; } | tr -d '\n' >"$bundle/commit"
  git diff --quiet HEAD 2>/dev/null || echo -n " (with uncommitted changes)" >>"$bundle/commit"
  tar czf "$bundle.tgz" -C "$(dirname "$bundle")" bundle
  du -sh "$bundle" "$bundle.tgz"
  echo "scripts/gpu.sh: built $bundle; carry build/gpu/bundle to the GPU machine and run bash scripts/gpu.sh there"
  exit 0
fi

sections=("$@")
[ ${#sections[@]} -gt 0 ] || sections=(tests gpt bench sanitizer)
for s in "${sections[@]}"; do
  case $s in
    tests | gpt | bench | sanitizer) ;;
    *)
      echo "scripts/gpu.sh: no section '$s' (tests, gpt, bench, sanitizer; none: all of them)" >&2
      exit 2
      ;;
  esac
done
# wanted SECTION: whether this run includes it.
wanted() { [[ " ${sections[*]} " == *" $1 "* ]]; }

if ! command -v nvidia-smi >/dev/null || ! grep -q '^GPU ' <<<"$(nvidia-smi -L 2>/dev/null)"; then
  echo "scripts/gpu.sh: no NVIDIA GPU here (nvidia-smi lists none): nothing to run. Build the bundle with" \
    "'bash scripts/gpu.sh --build' and run this script on a machine with a GPU."
  exit 77
fi
[ -d "$bundle" ] || [ ! -f "$bundle.tgz" ] || tar xzf "$bundle.tgz" -C "$(dirname "$bundle")"
[ -d "$bundle" ] || { echo "scripts/gpu.sh: no $bundle: build it first with 'bash scripts/gpu.sh --build'" >&2; exit 2; }

out=${OUT:-$root/build/gpu}
mkdir -p "$out"
report=$out/report.md
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# CUDA's own libraries (cudart, cuBLAS, NCCL) come from the GPU machine. Where the loader does not
# find one (NCCL is not in every CUDA install; PyTorch's wheels carry it), look for it under /usr and
# /opt and add its folder.
for f in "$bundle"/*; do
  [ -x "$f" ] && [ -f "$f" ] && ldd "$f" 2>/dev/null | awk '/not found/ {print $1}'
done | sort -u | while read -r lib; do
  found=$(find /usr /opt -name "$lib" \( -type f -o -type l \) 2>/dev/null | head -1)
  [ -n "$found" ] && dirname "$found"
done >"$out/.libdirs"
while read -r d; do export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"; done <"$out/.libdirs"
rm -f "$out/.libdirs"
# Each step has a time limit (seconds; CTPIPE_GPU_STEP_TIMEOUT), so that a hang is a failure in the
# report rather than a run that never ends.
step_timeout=${CTPIPE_GPU_STEP_TIMEOUT:-300}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The bundle's Open MPI, the one the programs were linked with (a machine's own mpirun of another
# build fails to load its components beside the bundle's libraries): one node, shared memory only
# (the components Debian's /etc/openmpi turns off stay off).
if [ -x "$bundle/openmpi/bin/mpirun" ]; then
  export OPAL_PREFIX=$bundle/openmpi PATH=$bundle/openmpi/bin:$PATH
  export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_mtl=^ofi OMPI_MCA_osc=^ucx,pt2pt \
    OMPI_MCA_btl_base_warn_component_unused=0
  # (A machine's own PMIx plugins of another version fail to load beside the bundle's libpmix;
  # PMIx goes on without them, and its warning about compression is only noise.)
  export PMIX_MCA_pcompress_base_silence_warning=1
fi
failures=0
{
  echo "# ctpipe on a GPU: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "- device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
  echo "- CUDA: $(nvcc --version 2>/dev/null | tail -1 || echo 'nvcc not on PATH')"
  echo "- commit: $(cat "$bundle/commit" 2>/dev/null || echo unknown) (the bundle's build)"
  echo "- sections: ${sections[*]}"
  echo
} >"$report"

# run NAME COMMAND...: runs it, records its exit code and the tail of its output.
run() {
  local name=$1
  shift
  local log="$out/$name.log" rc
  local start=$SECONDS
  if declare -F "$1" >/dev/null; then  # a function of this script: run in a shell of its own
    export -f "$1"
    export bundle out
    set -- bash -c "$1"
  fi
  timeout --kill-after=10 "$step_timeout" "$@" >"$log" 2>&1
  rc=$?
  case $rc in
    0) echo "- $name: passed ($((SECONDS - start)) s)" >>"$report" ;;
    77) echo "- $name: skipped (exit 77)" >>"$report" ;;
    124 | 137)
      echo "- $name: FAILED (over its ${step_timeout} s limit)" >>"$report"
      failures=$((failures + 1))
      ;;
    *)
      echo "- $name: FAILED (exit $rc)" >>"$report"
      failures=$((failures + 1))
      ;;
  esac
  { echo '  ```'; tail -n 15 "$log" | sed 's/^/  /'; echo '  ```'; } >>"$report"
}
unavailable() { echo "- $1: unavailable ($2)" >>"$report"; }

if wanted tests; then
  echo "## Tests and example" >>"$report"
  run gpu_tests "$bundle/ctpipe_gpu_tests"
  run gpu_device_optimizer "$bundle/ctpipe_gpu_optimizer_tests"
  run gpu_device_layers "$bundle/ctpipe_gpu_device_layer_tests"
  run cuda_mlp "$bundle/cuda_mlp"
  # The GPT example on the GPU: one rank eager and graph, ZB-V on two ranks of the GPU (graph).
  for run_gpt in "one eager" "one graph" "zb-v graph"; do
    read -r sched how <<<"$run_gpt"
    run "gpt_gpu_${sched}_$how" "$bundle/gpt_gpu" --text "$bundle/gpt_text.txt" --steps 300 --schedule "$sched" \
      --launch "$how"
  done
  if [ -x "$bundle/ctpipe_nccl_gpu_solo" ]; then
    run nccl_solo "$bundle/ctpipe_nccl_gpu_solo"
  else
    unavailable nccl_solo "the bundle has no NCCL test (built without NCCL)"
fi
if [ -x "$bundle/ctpipe_nccl_gpu_tests" ] && command -v mpirun >/dev/null; then
  # NCCL under mpirun, and the MPI executor's device path; two processes where two GPUs are.
  run nccl_np1 mpirun -np 1 "$bundle/ctpipe_nccl_gpu_tests"
  if [ "$(nvidia-smi -L | grep -c '^GPU ')" -ge 2 ]; then
    run nccl_np2 mpirun -np 2 --oversubscribe "$bundle/ctpipe_nccl_gpu_tests"
  fi
else
  unavailable nccl_np1 "no mpirun (neither the machine's nor the bundle's), or the bundle has no MPI test"
fi
fi
if wanted gpt; then
  echo >>"$report"
  echo "## The GPT against PyTorch" >>"$report"
  # The same model, parameters, tokens, optimiser and precision in ctpipe (gpt_gpu: one rank, eager and
  # graph) and in PyTorch (bench/pytorch_gpt_gpu.py --from the dump ctpipe's first run writes: eager,
  # torch.compile, reduce-overhead; the written-out attention and, at GPT-2's shape, the fused one
  # too), at two sizes (the example's tiny GPT; GPT-2 small's: 12 blocks, width 768, context 512), in
  # fp32 (TF32 off on both) and bf16: whole sequences, no dropout, AdamW at a constant 1e-3 (weight
  # decay 0.1) after clipping at 1. Each run's last line is its figures, its first loss the same
  # model's on the same tokens.
  # (CTPIPE_GPU_GPT_SIZES="tiny" or "gpt2": one size only, where a lent machine's minutes are short.)
  for size in ${CTPIPE_GPU_GPT_SIZES:-tiny gpt2}; do
    bin="$bundle/gpt_gpu"
    steps=60 context=64
    if [ "$size" = gpt2 ]; then bin="$bundle/gpt_gpu_gpt2" steps=20 context=512; fi
    dump="$out/gpt_$size.dump"
    rm -f "$dump"
    if [ -x "$bin" ]; then
      for dtype in fp32 bf16; do
        for how in eager graph; do
          extra=()
          [ "$dtype$how" = fp32eager ] && extra=(--dump "$dump")
          run "gpt_${size}_ctpipe_${dtype}_$how" "$bin" --text "$bundle/gpt_text.txt" --steps "$steps" --schedule one \
            --launch "$how" --precision "$dtype" --min-tokens "$context" --dropout 0 --lr 1e-3 --min-lr 1e-3 \
            --warmup 0 --weight-decay 0.1 --clip 1 --eval-every 0 --quiet "${extra[@]}"
        done
      done
      # Pipelining on one GPU: two ranks through ZB-V (their streams overlap) against one rank above.
      run "gpt_${size}_ctpipe_fp32_zb-v_graph" "$bin" --text "$bundle/gpt_text.txt" --steps "$steps" --schedule zb-v \
        --launch graph --min-tokens "$context" --dropout 0 --lr 1e-3 --min-lr 1e-3 --warmup 0 --weight-decay 0.1 \
        --clip 1 --eval-every 0 --quiet
    else
      unavailable "gpt_${size}_ctpipe" "the bundle has no $(basename "$bin")"
    fi
    if ! python3 -c 'import torch' 2>/dev/null; then
      unavailable "gpt_${size}_torch" "python3 cannot import torch"
      continue
    fi
    from=()
    [ -f "$dump" ] && from=(--from "$dump")
    for dtype in fp32 bf16; do
      for mode in eager compile reduce-overhead; do
        run "gpt_${size}_torch_${dtype}_$mode" python3 bench/pytorch_gpt_gpu.py --size "$size" --mode "$mode" \
          --dtype "$dtype" --steps "$steps" "${from[@]}"
      done
      [ "$size" = gpt2 ] && run "gpt_${size}_torch_${dtype}_eager_sdpa" python3 bench/pytorch_gpt_gpu.py --size "$size" \
        --sdpa --dtype "$dtype" --steps "$steps" "${from[@]}"
    done
  done
fi
if wanted bench; then
  echo >>"$report"
  echo "## Benchmark" >>"$report"
  run bench_cuda_executor "$bundle/bench_cuda_executor" --benchmark_out="$out/cuda_executor.json" \
    --benchmark_out_format=json --benchmark_min_time=0.2
  if python3 -c 'import torch.distributed.pipeline.sync, numpy' 2>/dev/null; then
    # bench/pytorch_pipe.sh's comparison (ctpipe's host executor against PyTorch's GPipe on the CPU),
    # from the bundle's bench_pipe_mlp: this PyTorch still has torch.distributed.pipeline.sync.Pipe.
    pipe_run() {
      "$bundle/bench_pipe_mlp" --dump "$out/mlp.bin" &&
        for _ in 1 2 3; do
          "$bundle/bench_pipe_mlp" --ranks 2 --steps 20 && "$bundle/bench_pipe_mlp" --ranks 1 --steps 20 &&
            python3 bench/pytorch_pipe.py "$out/mlp.bin" --steps 20 --threads 1 2>/dev/null &&
            python3 bench/pytorch_pipe.py "$out/mlp.bin" --steps 20 --threads 2 2>/dev/null
        done >"$out/pipe.jsonl" && python3 bench/report.py pipe "$out/pipe.jsonl"
    }
    run pytorch_pipe pipe_run
  elif python3 -c 'import torch' 2>/dev/null; then
    unavailable pytorch_pipe "PyTorch $(python3 -c 'import torch; print(torch.__version__)') has no torch.distributed.pipeline.sync.Pipe (removed in 2.4), which the CPU comparison runs"
  else
    unavailable pytorch_pipe "python3 cannot import torch"
fi
fi
if wanted sanitizer; then
  echo >>"$report"
  echo "## compute-sanitizer" >>"$report"
  if command -v compute-sanitizer >/dev/null; then
    # (racecheck leaves out the overlap test: its one-thread spin kernels, 1 ms each, take minutes under
    # racecheck's instrumentation; the same kernels run under memcheck.)
    run sanitizer_memcheck compute-sanitizer --tool memcheck --error-exitcode 1 "$bundle/ctpipe_gpu_tests"
    run sanitizer_racecheck compute-sanitizer --tool racecheck --error-exitcode 1 "$bundle/ctpipe_gpu_tests" \
      -tce='*overlap*'
  else
    unavailable compute-sanitizer "not on PATH"
fi
fi
echo >>"$report"
echo "failures: $failures" >>"$report"
cat "$report"
[ "$failures" = 0 ]
