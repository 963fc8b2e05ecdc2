#!/usr/bin/env bash
# Installs what is missing, then builds and runs the whole test suite with g++ (-Og -Wall -Wextra
# -Werror -Wpedantic), then with clang++ under AddressSanitizer + UndefinedBehaviorSanitizer
# (-O0, assertions on; the asan preset of CMakePresets.json), then the host-executor tests and the
# quickstart under ThreadSanitizer (the tsan preset), and runs the quickstart example.
# The MPI tests run under mpirun (Open MPI). With the CUDA Toolkit present (nvcc on PATH) the g++
# build includes the CUDA and NCCL executors' examples and GPU tests (skipped where no GPU is) and
# compiles ctpipe's headers, the compile-time figures and the executors with nvcc; the clang build
# is lean (CTPIPE_LEAN_TESTS: it leaves out what nvcc builds, the GPT example, the split-backward
# sweep on the simulator and the packaging tests, which the g++ build runs) and runs every other
# test under the sanitizers. A last build checks that ctpipe builds as if the CUDA Toolkit and MPI
# were absent. The benchmarks are not built (bench/run_all.sh does); the g++ build runs every
# command the documentation shows (tests/tools/docs_commands.sh), and runs scripts/gpu.sh, which
# exits 77 where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs="$(nproc)"
echo "== g++ (at ${SECONDS} s)"
dir="build/test-g++"
# The benchmarks are not built here (bench/run_all.sh builds and runs them; bench/README.md): on
# the slower VMs of this kind, compiling them (unoptimised, about 4 minutes there) took CI to the
# edge of its 90 (docs/testing.md, 2026-11-28). Their tools' tests (report.py, compile_time.sh)
# still run.
# -Og: the tests check results, not speed; -Og compiles a sweep source in 0.74x to 0.94x the CPU of
# -O1 (docs/testing.md, 2026-11-30), which compiled 15 to 25% faster than -O2, itself 14% faster
# than -O3; it keeps the data-flow analyses g++'s warnings need. nvcc too: its host code at -Og
# (it was -O3, CMake's Release default), 0.54x to 0.65x of the CPU for the executors' .cu file.
# The quickstart script and the benchmarks measured in bench/ build Release (-O3). The GPU tests,
# which skip here, compile unoptimised (CTPIPE_GPU_TESTS_BUILD_ONLY: 89 s to 49 s for gpu_tests.cpp).
# g++'s garbage collector runs first once its heap passes 2 GiB, then past five times what survived
# (it ran from 128 MiB, then past twice what survived): a sweep source compiles in 0.76x to 0.89x
# the CPU time, its peak memory about 1.8x (docs/testing.md); the tests' builds only.
gcc_gc="--param=ggc-min-expand=400 --param=ggc-min-heapsize=2097152"
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-Og -DNDEBUG" \
  -DCMAKE_CUDA_FLAGS_RELEASE="-Xcompiler=-Og -DNDEBUG" -DCMAKE_CXX_COMPILER=g++ \
  -DCMAKE_CXX_FLAGS="$gcc_gc" \
  -DCTPIPE_LEAN_TESTS=OFF -DCTPIPE_BUILD_BENCH=OFF -DCTPIPE_BENCH_SET=gnu -DCTPIPE_BENCH_BUILD_ONLY=ON \
  -DCTPIPE_GPU_TESTS_BUILD_ONLY=ON >/dev/null
cmake --build "$dir" -j"$jobs"
(cd "$dir" && ctest --output-on-failure -j"$jobs")
# clang++, lean, every test under ASan+UBSan (the asan preset); then the ThreadSanitizer build.
for preset in asan tsan; do
  echo "== $preset (at ${SECONDS} s)"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j"$jobs"
  ctest --preset "$preset" -j"$jobs"
done
echo "== without CUDA and MPI (at ${SECONDS} s)"
# (Each header alone is the g++ build's test above, on the same include path and definitions: it
# needs neither the CUDA Toolkit nor MPI.)
cmake -S . -B build/test-nocuda -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DCMAKE_CXX_FLAGS="$gcc_gc" > build/nocuda.log
grep -q "no CUDA Toolkit" build/nocuda.log
grep -q "no MPI" build/nocuda.log
cmake --build build/test-nocuda --target quickstart -j"$jobs"
./build/test-nocuda/bin/quickstart >/dev/null && echo "without CUDA and MPI: quickstart built and ran"
./build/test-g++/bin/quickstart >/dev/null && echo "quickstart: ran"
echo "== done in ${SECONDS} s"
