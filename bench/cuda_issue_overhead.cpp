// The CUDA executor's own cost of issuing a step, on the CPU: the executor on a backend whose calls
// do nothing (no CUDA), with layers that launch nothing. What remains is what ctpipe adds per task
// around the CUDA calls a step makes (a launch costs the CUDA runtime some microseconds): the walk
// through the global order, the checks of every call's status, the views and events it computes.
// 1F1B p = 2, 16 to 4,096 tasks, unrolled and table walk; and the split-backward schedules at p = 2
// (ZB-H1: I and W with a grad stash; DualPipeV: V placement and pairs F&B on a second stream).
#include <benchmark/benchmark.h>

#include "null_backend.hpp"

#include <vector>

namespace {

using null_device::empty_layer;
using null_device::empty_loss;
using null_device::net;
using null_device::null_backend;

// Schedule S's table, with `Net` split into its stages.
template <auto S, class Net, ctpipe::dispatch D>
void issue_schedule(benchmark::State& state) {
  constexpr auto table = ctpipe::make_table<S>();
  using executor = ctpipe::cuda::basic_executor<table, Net, ctpipe::partition<Net, table.stages()>(), empty_loss, 0, D,
                                                null_backend>;
  Net m;
  empty_loss l;
  executor exec(m, l);
  std::vector<empty_layer::input_type> in(static_cast<std::size_t>(table.microbatches()));
  std::vector<empty_loss::target_type> tg(in.size());
  for (auto _ : state) exec.enqueue(in, tg);
  state.counters["tasks"] = static_cast<double>(table.size());
  state.counters["ns_per_task"] =
      benchmark::Counter(static_cast<double>(table.size()) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// 1F1B p = 2 with m microbatches on the two-layer net.
template <int M, ctpipe::dispatch D>
void issue(benchmark::State& state) {
  issue_schedule<ctpipe::one_f_one_b(2, M), net, D>(state);
}

// A whole step, issued and waited for (on this backend: nothing to wait for), recorded or not
// (record_steps: two timed events a task, read at wait()). 1F1B p = 2, 64 tasks, unrolled.
template <bool Recorded>
void step(benchmark::State& state) {
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 8)>();
  using executor = ctpipe::cuda::basic_executor<table, net, ctpipe::partition<net, 2>(), empty_loss, 0,
                                                ctpipe::dispatch::unrolled, null_backend>;
  net m;
  empty_loss l;
  executor exec(m, l);
  if constexpr (Recorded) exec.record_steps(true);
  std::vector<empty_layer::input_type> in(8);
  std::vector<empty_loss::target_type> tg(in.size());
  for (auto _ : state) benchmark::DoNotOptimize(exec.step(in, tg));
  state.counters["tasks"] = static_cast<double>(table.size());
}

using ctpipe::dispatch;
using null_device::split_net;
BENCHMARK(issue_schedule<ctpipe::zb_h1(2, 32), split_net, dispatch::unrolled>)->Name("issue/unrolled/zb_h1/m:32");
BENCHMARK(issue_schedule<ctpipe::zb_h1(2, 32), split_net, dispatch::table_walk>)->Name("issue/walk/zb_h1/m:32");
BENCHMARK(issue_schedule<ctpipe::dualpipe_v(2, 32), split_net, dispatch::unrolled>)
    ->Name("issue/unrolled/dualpipe_v/m:32");
BENCHMARK(issue_schedule<ctpipe::dualpipe_v(2, 32), split_net, dispatch::table_walk>)
    ->Name("issue/walk/dualpipe_v/m:32");
BENCHMARK(step<false>)->Name("step/tasks:64");
BENCHMARK(step<true>)->Name("step/recorded/tasks:64");
BENCHMARK(issue<2, dispatch::unrolled>)->Name("issue/unrolled/tasks:16");
BENCHMARK(issue<2, dispatch::table_walk>)->Name("issue/walk/tasks:16");
BENCHMARK(issue<8, dispatch::unrolled>)->Name("issue/unrolled/tasks:64");
BENCHMARK(issue<8, dispatch::table_walk>)->Name("issue/walk/tasks:64");
BENCHMARK(issue<32, dispatch::unrolled>)->Name("issue/unrolled/tasks:256");
BENCHMARK(issue<32, dispatch::table_walk>)->Name("issue/walk/tasks:256");
#ifndef CTPIPE_BENCH_BUILD_ONLY  // (bench/CMakeLists.txt)
BENCHMARK(issue<128, dispatch::unrolled>)->Name("issue/unrolled/tasks:1024");
BENCHMARK(issue<128, dispatch::table_walk>)->Name("issue/walk/tasks:1024");
BENCHMARK(issue<512, dispatch::table_walk>)->Name("issue/walk/tasks:4096");
#endif

}  // namespace

BENCHMARK_MAIN();
