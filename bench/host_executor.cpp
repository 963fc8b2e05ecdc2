// Quick figures for the host executor (the full comparison is its own benchmark suite):
//  - per task: one rank running 2 x m tasks that do almost nothing, against sequential_step calling
//    the same functors in the same order on one thread (the hand-written baseline);
//  - per hand-off: naive schedule over 2 ranks, where every microbatch crosses the boundary twice
//    (activation forwards, gradient backwards) and nothing overlaps;
//  - the forward pass alone (evaluate) of 1F1B over 2 ranks: half the tasks and messages of its step.
#include "tick.hpp"

#include <array>
#include <cstdint>
#include <vector>

namespace {

using bench::count_loss;
using bench::one_layer;
using bench::tick;
using bench::two_layers;

// Recording: with record_steps(true), each task's start and end read from the clock (the cost of
// tracing when it is on; off, the executor runs the code it runs without the feature).
template <auto Table, class Model, bool Recording = false>
void executor_step(benchmark::State& state) {
  constexpr int m = Table.params.microbatches;
  Model model;
  count_loss loss;
  std::vector<tick::input_type> in(m);
  std::vector<int> targets(m);
  ctpipe::host_executor<Table, Model, ctpipe::partition<Model, Table.stages()>(), count_loss> exec(model, loss);
  exec.record_steps(Recording);
  for (auto _ : state) benchmark::DoNotOptimize(exec.step(in, targets).data());
  const double tasks = static_cast<double>(2 * m * Table.stages());
  bench::per_task_counters(state, tasks, Table.stages() > 1 ? 2.0 * m : 0.0);
}

// The forward pass alone (evaluate): m F tasks a stage, through the forward-only table.
template <auto Table, class Model>
void executor_evaluate(benchmark::State& state) {
  constexpr int m = Table.params.microbatches;
  Model model;
  count_loss loss;
  std::vector<tick::input_type> in(m);
  std::vector<int> targets(m);
  ctpipe::host_executor<Table, Model, ctpipe::partition<Model, Table.stages()>(), count_loss> exec(model, loss);
  exec.evaluate(in, targets);  // (its buffers and threads are made at the first pass)
  for (auto _ : state) benchmark::DoNotOptimize(exec.evaluate(in, targets).data());
  const double tasks = static_cast<double>(m * Table.stages());
  bench::per_task_counters(state, tasks, Table.stages() > 1 ? 1.0 * m : 0.0);
}

template <int M>
void sequential_step(benchmark::State& state) {
  one_layer model;
  count_loss loss;
  std::vector<tick::input_type> in(M);
  std::vector<int> targets(M);
  std::vector<double> losses(M);
  for (auto _ : state) {
    ctpipe::sequential_step(model, loss, std::span<const tick::input_type>(in), std::span<const int>(targets),
                            std::span<double>(losses));
    benchmark::DoNotOptimize(losses.data());
  }
  bench::per_task_counters(state, 2.0 * M);
}

constexpr auto one_rank_64 = ctpipe::make_table<ctpipe::gpipe(1, 64)>();
constexpr auto one_rank_512 = ctpipe::make_table<ctpipe::gpipe(1, 512)>();
constexpr auto two_ranks_naive = ctpipe::make_table<ctpipe::naive(2, 128)>();
constexpr auto two_ranks_1f1b = ctpipe::make_table<ctpipe::one_f_one_b(2, 128)>();

}  // namespace

BENCHMARK(sequential_step<64>)->Name("per_task/sequential/m=64");
BENCHMARK(executor_step<one_rank_64, one_layer>)->Name("per_task/executor_1_rank/m=64")->UseRealTime();
BENCHMARK(executor_step<one_rank_64, one_layer, true>)->Name("per_task/executor_1_rank_recording/m=64")->UseRealTime();
BENCHMARK(sequential_step<512>)->Name("per_task/sequential/m=512");
BENCHMARK(executor_step<one_rank_512, one_layer>)->Name("per_task/executor_1_rank/m=512")->UseRealTime();
BENCHMARK(executor_step<two_ranks_naive, two_layers>)->Name("handoff/naive_2_ranks/m=128")->UseRealTime();
BENCHMARK(executor_step<two_ranks_1f1b, two_layers>)->Name("handoff/1f1b_2_ranks/m=128")->UseRealTime();
BENCHMARK(executor_step<two_ranks_1f1b, two_layers, true>)->Name("handoff/1f1b_2_ranks_recording/m=128")->UseRealTime();
BENCHMARK(executor_evaluate<two_ranks_1f1b, two_layers>)->Name("handoff/1f1b_2_ranks_evaluate/m=128")->UseRealTime();

BENCHMARK_MAIN();
