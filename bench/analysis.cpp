// Run-time cost of generating, lowering, verifying and analysing tables (the explorer's path).
#include <benchmark/benchmark.h>

#include <ctpipe/ctpipe.hpp>

static void generate_and_analyse(benchmark::State& state) {
  const auto s = ctpipe::interleaved(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), 2);
  int tasks = 0;
  for (auto _ : state) {
    const auto t = ctpipe::generate(s);
    const auto r = ctpipe::analyse(t, ctpipe::cost_model{0.5, 1.0});
    benchmark::DoNotOptimize(r.makespan);
    tasks = t.size();
  }
  state.counters["tasks"] = tasks;
  state.counters["tasks/s"] =
      benchmark::Counter(static_cast<double>(tasks), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(generate_and_analyse)->Args({4, 8})->Args({16, 64})->Args({64, 512})->Unit(benchmark::kMicrosecond);
